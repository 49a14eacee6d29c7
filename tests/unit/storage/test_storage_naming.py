"""Topic and partition names -> directory names: safe, injective, reversible."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dafka.storage import (
    FsyncPolicy,
    InvalidNameError,
    Storage,
    StorageConfig,
    directory_name,
    name_from_directory,
)
from dafka.storage._naming import MAX_PLAIN, write_name_file

HOSTILE = [
    "..",
    ".",
    "../x",
    "../../etc/passwd",
    "/abs",
    "a/b",
    "a\\b",
    "\x00",
    "nul\x00inside",
    "",
    "%",
    "%2F",
    "~",
    ".name",
    ".lock",
    "CON",
    "é",
    "\udcff\udcfe",
    " space ",
    "x" * 255,
    "/" * 255,
    "\n\t",
]

wire_names = st.binary(max_size=300).map(lambda b: b.decode("utf-8", "surrogateescape"))


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_stay_one_plain_component(name: str) -> None:
    d = directory_name(name)
    assert d not in ("", ".", "..")
    assert "/" not in d
    assert "\x00" not in d
    assert not d.startswith(".")
    assert len(d.encode()) <= 255
    assert d.isascii()


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_round_trip_on_disk(tmp_path: Path, name: str) -> None:
    path = tmp_path / directory_name(name)
    path.mkdir()
    assert path.resolve().parent == tmp_path.resolve()
    if "~" in path.name:
        write_name_file(path, name)
    assert name_from_directory(path) == name


def test_hostile_topics_and_partitions_live_under_the_root(tmp_path: Path) -> None:
    root = tmp_path / "data"
    config = StorageConfig(fsync=FsyncPolicy.os())
    with Storage.open(root, config) as storage:
        for i, name in enumerate(HOSTILE):
            storage.append(name, name, 0, [b"%d" % i])
            storage.append("t", name, 0, [b"p%d" % i])
    for path in tmp_path.rglob("*"):
        assert path.resolve().is_relative_to(root.resolve())
    with Storage.open(root, config) as storage:
        assert storage.recovery_report.skipped == []
        assert sorted(storage.topics()) == sorted({*HOSTILE, "t"})
        assert storage.heads("t") == dict.fromkeys(HOSTILE, 0)
        for i, name in enumerate(HOSTILE):
            assert storage.read(name, name, 0, 5) == [(0, b"%d" % i)]


@settings(max_examples=300, deadline=None)
@given(wire_names, wire_names)
def test_mapping_is_injective(a: str, b: str) -> None:
    if a != b:
        assert directory_name(a) != directory_name(b)


@settings(max_examples=300, deadline=None)
@given(wire_names)
def test_plain_names_reverse_without_any_file(name: str) -> None:
    d = directory_name(name)
    if len(d) <= MAX_PLAIN and "~" not in d:
        assert name_from_directory(Path("/nonexistent") / d) == name


def test_long_names_need_their_name_file(tmp_path: Path) -> None:
    name = "ü" * 120
    d = tmp_path / directory_name(name)
    d.mkdir()
    assert name_from_directory(d) is None  # no .name yet: not ours
    write_name_file(d, name)
    assert name_from_directory(d) == name
    (d / ".name").write_bytes(b"something else")
    assert name_from_directory(d) is None  # digest mismatch


@pytest.mark.parametrize(
    "foreign",
    [".hidden", "%2e", "%2F%", "a%2", "%41", "a b", "%", "lost+found", "x~123", ".lock"],
)
def test_non_canonical_directories_are_not_ours(foreign: str) -> None:
    got = name_from_directory(Path("/nonexistent") / foreign)
    if foreign == "%":
        assert got == ""
    else:
        assert got is None


@pytest.mark.parametrize("bad", ["\ud800", "\udcc3\udca9", "a\udc41"])
def test_strings_no_wire_decode_produces_are_refused(bad: str) -> None:
    with pytest.raises(InvalidNameError):
        directory_name(bad)


def test_non_strings_are_refused() -> None:
    with pytest.raises(InvalidNameError):
        directory_name(b"bytes")  # type: ignore[arg-type]
