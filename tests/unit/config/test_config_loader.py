"""The settings loader: TOML file, DAFKA_* variables, checks and sources."""

from __future__ import annotations

from pathlib import Path

import pytest

from dafka.config import SETTINGS, load, tower_endpoints
from dafka.errors import ConfigError


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "dafka.toml"
    path.write_text(text)
    return path


def test_nested_tables_and_quoted_keys_name_the_c_keys(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        '"beacon/interval" = 0.5\n[consumer.offset]\nreset = "earliest"\n'
        '[store]\nfsync = "batch"\n',
    )
    layers = load(path, {})
    assert layers.file == {
        "beacon/interval": 0.5,
        "consumer/offset/reset": "earliest",
        "store/fsync": "batch",
    }


def test_env_wins_over_file_which_wins_over_default(tmp_path: Path) -> None:
    path = _write(tmp_path, "[beacon]\ninterval = 0.5\n[store]\nfsync = 'batch'\n")
    layers = load(None, {"DAFKA_CONFIG": str(path), "DAFKA_BEACON_INTERVAL": "2"})
    effective = layers.effective()
    assert effective["beacon/interval"].value == 2.0
    assert effective["beacon/interval"].source == "env DAFKA_BEACON_INTERVAL"
    assert effective["store/fsync"].value == "batch"
    assert effective["store/fsync"].source == f"file {path}"
    assert effective["bind"].value == ""  # the listening rule chooses (docs/deploy.md)
    assert effective["bind"].source == "default"


def test_unknown_key_is_named_with_a_suggestion(tmp_path: Path) -> None:
    path = _write(tmp_path, "[beacon]\nintervall = 1\n")
    with pytest.raises(ConfigError, match=r"unknown key 'beacon/intervall'.*'beacon/interval'"):
        load(path, {})


@pytest.mark.parametrize(
    ("text", "key", "accepted"),
    [
        ("[beacon]\ninterval = 0\n", "beacon/interval", "above 0"),
        ("[store]\nfsync = 'ms:1e9'\n", "store/fsync", "batch, records:N"),
        ("[consumer.offset]\nreset = 'first'\n", "consumer/offset/reset", "earliest, latest"),
        ("bind = 'not an ip'\n", "bind", "IP address"),
        ("towers = 'nohost'\n", "towers", "host:port"),
        ("[up]\nstores = true\n", "up/stores", "integer from 0 to 64"),
    ],
)
def test_a_bad_value_names_the_key_the_file_and_what_is_accepted(
    tmp_path: Path, text: str, key: str, accepted: str
) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load(path, {})
    message = str(caught.value)
    assert str(path) in message
    assert key in message
    assert accepted in message


def test_a_bad_environment_value_names_the_variable() -> None:
    with pytest.raises(ConfigError, match=r"DAFKA_STORE_FSYNC.*store/fsync"):
        load(None, {"DAFKA_STORE_FSYNC": "sometimes"})


def test_missing_or_invalid_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load(tmp_path / "nope.toml", {})
    with pytest.raises(ConfigError, match="not valid TOML"):
        load(_write(tmp_path, "beacon = [\n"), {})


def test_towers_forms() -> None:
    assert tower_endpoints("a:5556,b:6000:7000") == (
        ("tcp://a:5556", "tcp://a:5557"),
        ("tcp://b:6000", "tcp://b:7000"),
    )
    assert tower_endpoints(["tcp://127.0.0.1:1"]) == (("tcp://127.0.0.1:1", "tcp://127.0.0.1:2"),)
    assert SETTINGS["towers"].kind.parse("h:1, h:5:9") == "h:1,h:5:9"
    for bad in ("", "h", "h:0", "h:x", "my host:1", "h:1:70000"):
        with pytest.raises(ConfigError):
            tower_endpoints(bad)


def test_every_setting_has_an_env_name_and_a_valid_default() -> None:
    for key, setting in SETTINGS.items():
        assert setting.env.startswith("DAFKA_")
        assert setting.key == key
        if setting.default is not None:
            setting.kind.parse(setting.default)
