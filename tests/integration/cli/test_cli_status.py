"""``dafka status``, ``dafka topics`` and ``dafka top`` against a known cluster of processes.

A tower, two stores, two ``dafka produce`` processes on two topics (kept alive by an open
standard input) and a ``dafka consume``: the commands must show exactly those stores (ids and
addresses), topics, partitions, heads per store, producers and consumer.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dafka.server import LocalCluster
from tests.integration.cli.cli_run import dafka
from tests.integration.cluster.cluster_procs import BEACON_INTERVAL, DAFKA, Processes, wait_until


@dataclass(frozen=True)
class _Store:
    reader_id: str
    reader_port: int


@contextmanager
def _cluster(tmp_path: Path) -> Iterator[tuple[str, list[_Store]]]:
    """A tower and two stores (processes); yields the towers and the stores' reader ids."""
    interval = float(BEACON_INTERVAL)
    with LocalCluster(tmp_path / "data", stores=2, beacon_interval=interval) as cluster:
        stores = []
        for name in ("store-0", "store-1"):
            member = cluster.member(name)
            assert member.ready_match is not None
            stores.append(_Store(member.ready_match.group(2), member.ports[1]))
        yield cluster.towers, stores


def _join(tower: str) -> list[str]:
    return ["--tower", tower, "--beacon-interval", BEACON_INTERVAL]


def _status(tower: str, *args: str) -> dict[str, Any]:
    shown = dafka("status", *_join(tower), "--json", "--wait", "5", *args)
    assert shown.code == 0, shown.err
    found: dict[str, Any] = json.loads(shown.out)
    return found


def _status_until(
    tower: str, ready: Callable[[dict[str, Any]], bool], what: str, *args: str
) -> dict[str, Any]:
    """Run ``dafka status --json`` until ``ready(report)``."""

    def check() -> dict[str, Any] | None:
        found = _status(tower, *args)
        return found if ready(found) else None

    return wait_until(check, what)


def _heads(found: dict[str, Any], topic: str) -> dict[str, dict[str, Any]]:
    return {p["partition"]: p for p in found["topics"].get(topic, {}).get("partitions", [])}


def _settled(found: dict[str, Any], stores: list[_Store], expect: dict[str, int]) -> bool:
    """Every topic of ``expect`` (topic -> messages) fully stored in every store, announced."""
    if {s["id"] for s in found["stores"] if s["live"]} != {s.reader_id for s in stores}:
        return False
    for topic, messages in expect.items():
        parts = _heads(found, topic).values()
        if sum(p["head"] + 1 for p in parts) != messages or any(p["lag"] for p in parts):
            return False
    return True


def test_status_topics_and_top_show_a_known_cluster(procs: Processes, tmp_path: Path) -> None:
    with _cluster(tmp_path) as (tower, stores):
        _known_cluster(procs, tower, stores)


def _known_cluster(procs: Processes, tower: str, stores: list[_Store]) -> None:
    node = _join(tower)
    alpha = procs.spawn(
        "produce-alpha",
        [
            *DAFKA,
            "produce",
            "alpha",
            *node,
            "--no-batching",
            "--partitions",
            "2",
            "--name",
            "pa",
        ],
        stdin=True,
    )
    beta = procs.spawn(
        "produce-beta",
        [*DAFKA, "produce", "beta", *node, "--no-batching", "--name", "pb"],
        stdin=True,
    )
    for i in range(30):
        alpha.send_line(f"a{i}")
        if i < 12:
            beta.send_line(f"b{i}")
    consumer = procs.spawn("consume", [*DAFKA, "consume", "alpha", *node, "-o", "earliest"])
    wait_until(lambda: consumer.out_path.read_bytes().count(b"\n") == 30, "the consumer read 30")

    found = _status_until(
        tower,
        lambda f: _settled(f, stores, {"alpha": 30, "beta": 12}),
        "status: both topics stored on both stores",
    )
    # Stores: the two reader ids, where they listen, each holding every partition.
    by_id = {s["id"]: s for s in found["stores"]}
    held = len(_heads(found, "alpha")) + len(_heads(found, "beta"))
    assert held >= 2  # pa.0 and/or pa.1 (unkeyed messages), and pb.0
    for store in stores:
        shown = by_id[store.reader_id]
        assert shown["address"] == f"tcp://127.0.0.1:{store.reader_port}"
        assert shown["partitions"] == held
        assert shown["lag"] == 0
    assert {s["records"] for s in found["stores"]} == {
        sum(p["head"] + 1 for t in ("alpha", "beta") for p in _heads(found, t).values())
    }
    # Topics and partitions: head per store equals the partition head.
    alpha_parts = _heads(found, "alpha")
    assert set(alpha_parts) <= {"pa.0", "pa.1"}
    assert set(_heads(found, "beta")) == {"pb.0"}
    for parts in (alpha_parts, _heads(found, "beta")):
        for p in parts.values():
            assert p["stores"] == {s.reader_id: p["head"] for s in stores}
    # Live producers with their topic, and the one consumer.
    producers = {p["id"]: p["topic"] for p in found["producers"]}
    # (a partition that published nothing sends no HEAD: its topic is not announced)
    expected = {pid: "alpha" if pid in alpha_parts else None for pid in ("pa.0", "pa.1")}
    assert producers == {**expected, "pb.0": "beta"}
    assert len(found["consumers"]) == 1
    assert found["topics"]["alpha"]["consumed"] is True
    assert found["topics"]["beta"]["consumed"] is False
    # Producers announce their heads (HEAD every head interval): equal to the stored head.
    announced = _status_until(
        tower,
        lambda f: all(p["producer_head"] == p["head"] for p in _heads(f, "alpha").values()),
        "the producers' HEADs",
        "alpha",
    )
    assert list(announced["topics"]) == ["alpha"]  # TOPIC arguments limit the report

    text = dafka("status", *node, "--wait", "5")
    assert text.code == 0, text.err
    lines = text.out.decode()
    assert "stores: 2 live" in lines
    assert "producers: 3 live" in lines
    assert "consumers: 1 live" in lines
    assert "topic beta: 1 partition(s), 12 record(s), 1 producer(s)" in lines

    # The producer of beta leaves: beta is still found (the stores hold it), with no producer.
    beta.popen.stdin.close()  # type: ignore[union-attr]
    assert beta.wait_exit() == 0
    gone = _status_until(
        tower,
        lambda f: "pb.0" not in {p["id"] for p in f["producers"]},
        "pb.0 gone from the producers",
    )
    assert _heads(gone, "beta")["pb.0"]["head"] == 11
    assert _heads(gone, "beta")["pb.0"]["producer_head"] is None

    listed = dafka("topics", *node, "--json", "--wait", "5")
    assert listed.code == 0, listed.err
    rows = {r["topic"]: r for r in json.loads(listed.out)}
    assert rows["alpha"]["records"] == 30
    assert rows["alpha"]["producers"] == sum(1 for t in expected.values() if t == "alpha")
    assert rows["beta"] == {
        "topic": "beta",
        "partitions": 1,
        "records": 12,
        "producers": 0,
        "consumed": False,
        "lag": 0,
    }
    table = dafka("topics", *node, "--wait", "5")
    assert table.out.decode().splitlines()[0].split() == [
        "TOPIC",
        "PARTITIONS",
        "RECORDS",
        "PRODUCERS",
        "CONSUMED",
        "LAG",
    ]

    frames = dafka("top", *node, "--iterations", "2", "--interval", "0.2", env={"COLUMNS": "200"})
    assert frames.code == 0, frames.err
    shown = frames.out.decode()
    assert shown.count("stores 2") == 2  # two frames
    assert "pb.0" in shown
    assert "alpha" in shown
    for store in stores:
        assert store.reader_id in shown


def test_topics_finds_topics_whose_producers_are_gone(procs: Processes, tmp_path: Path) -> None:
    with _cluster(tmp_path) as (tower, _):
        _gone_producers(tower)


def _gone_producers(tower: str) -> None:
    node = _join(tower)
    for topic, count in (("gone1", 5), ("gone2", 7)):
        lines = b"".join(b"%d\n" % i for i in range(count))
        done = dafka("produce", topic, *node, "--no-batching", stdin=lines)
        assert done.code == 0, done.err
    # No producer or consumer is left: only the stores know these topics.
    for _ in range(3):  # every run finds them (not a lucky one)
        listed = dafka("topics", *node, "--json", "--wait", "5")
        assert listed.code == 0, listed.err
        rows = {r["topic"]: (r["partitions"], r["records"]) for r in json.loads(listed.out)}
        assert rows == {"gone1": (1, 5), "gone2": (1, 7)}


def test_top_exits_0_on_ctrl_c(procs: Processes, tmp_path: Path) -> None:
    with _cluster(tmp_path) as (tower, _):
        top = procs.spawn("top", [*DAFKA, "top", *_join(tower), "--interval", "0.2"])
        wait_until(lambda: top.out_path.read_text().count("stores 2") >= 2, "two frames of top")
        assert top.stop(signal.SIGINT) == 0
        assert "Traceback" not in top.stderr()


def test_status_without_a_tower_is_a_clear_error() -> None:
    shown = dafka("status", "--tower", "127.0.0.1:1", "--wait", "1")
    assert shown.code == 1
    assert shown.err.startswith("Error: ")
    assert "Traceback" not in shown.err
