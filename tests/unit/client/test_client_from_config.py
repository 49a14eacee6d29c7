"""Clients read the commands' configuration: TOML file, DAFKA_CONFIG, DAFKA_* variables."""

from __future__ import annotations

from pathlib import Path

import pytest

from dafka.client import ConsumerSettings, ProducerSettings
from dafka.config import CLIENT_FIELDS, SETTINGS
from dafka.errors import ConfigError


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "dafka.toml"
    path.write_text(text)
    return path


def test_every_client_key_is_a_setting_and_every_field_exists() -> None:
    assert set(CLIENT_FIELDS) <= set(SETTINGS)
    producer = set(ProducerSettings.__dataclass_fields__)
    consumer = set(ConsumerSettings.__dataclass_fields__)
    for key, (field, roles) in CLIENT_FIELDS.items():
        if "producer" in roles:
            assert field in producer, key
        if "consumer" in roles:
            assert field in consumer, key


def test_file_then_environment_then_arguments(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        'towers = "10.0.0.1:6000,10.0.0.2:6000"\n'
        "[beacon]\ninterval = 0.5\n"
        '[producer]\nname = "w1"\npartitions = 3\nlinger_ms = 2\nhead_interval = 0.25\n'
        '[consumer.offset]\nreset = "earliest"\n'
        '[store]\ndb = "/var/lib/dafka"\n',  # the daemons' keys are valid and ignored here
    )
    p = ProducerSettings.from_config(path, environ={"DAFKA_PRODUCER_PARTITIONS": "4"})
    assert (p.towers, p.beacon_interval, p.beacon_timeout) == (
        "10.0.0.1:6000,10.0.0.2:6000",
        0.5,
        None,
    )
    assert p.transport().beacon_timeout == 2.0  # 4 beacon intervals, as the commands
    assert (p.name, p.partitions, p.linger_ms, p.head_interval) == ("w1", 4, 2.0, 0.25)
    assert ProducerSettings.from_config(path, environ={}, partitions=7).partitions == 7
    c = ConsumerSettings.from_config(environ={"DAFKA_CONFIG": str(path)})
    assert (c.offset_reset, c.towers) == ("earliest", "10.0.0.1:6000,10.0.0.2:6000")
    # Nothing set: the client's own defaults (not the commands' bind 127.0.0.1).
    assert ConsumerSettings.from_config(environ={}) == ConsumerSettings()


def test_wrong_keys_and_values_name_the_key_and_what_is_accepted(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown key 'producer/lingr_ms'.*producer/linger_ms"):
        ProducerSettings.from_config(_file(tmp_path, "[producer]\nlingr_ms = 2\n"), environ={})
    with pytest.raises(ConfigError, match=r"consumer/offset/reset = 'first'.*earliest"):
        ConsumerSettings.from_config(
            _file(tmp_path, '[consumer.offset]\nreset = "first"\n'), environ={}
        )
    with pytest.raises(ConfigError, match=r"DAFKA_PRODUCER_PARTITIONS.*from 1 to 1024"):
        ProducerSettings.from_config(environ={"DAFKA_PRODUCER_PARTITIONS": "0"})
    with pytest.raises(ConfigError, match=r"DAFKA_TOWERS.*host:port"):
        ProducerSettings.from_config(environ={"DAFKA_TOWERS": "h:6000:7000:8000"})
    # the commands' grammar: a tower whose XPUB is not at port+1
    got = ProducerSettings.from_config(environ={"DAFKA_TOWERS": "h:6000:7000"})
    assert got.transport().tower_pub_addresses == ("tcp://h:7000",)
    with pytest.raises(ConfigError, match="not found"):
        ProducerSettings.from_config(tmp_path / "missing.toml", environ={})


def test_acks_from_is_read_from_the_file_and_the_environment(tmp_path: Path) -> None:
    """``producer/acks_from`` reaches the producer's machine: "any" for C stores."""
    path = _file(tmp_path, '[producer]\nacks_from = "any"\n')
    from_file = ProducerSettings.from_config(path, environ={})
    assert from_file.acks_from == "any"
    assert from_file.producer_config().acks_from == "any"
    assert ProducerSettings.from_config(environ={}).acks_from == "stores"
    got = ProducerSettings.from_config(path, environ={"DAFKA_PRODUCER_ACKS_FROM": "stores"})
    assert got.acks_from == "stores"
    with pytest.raises(ConfigError, match=r"DAFKA_PRODUCER_ACKS_FROM.*one of stores, any"):
        ProducerSettings.from_config(environ={"DAFKA_PRODUCER_ACKS_FROM": "all"})
