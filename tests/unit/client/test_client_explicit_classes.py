"""The class a call returns is the class it names (issue 22).

A transactional producer and a read-committed consumer are classes of the front door, built
by name. ``Producer(transactional_id=...)`` and ``Consumer(isolation_level="read_committed")``
used to return another class from ``__new__`` (one not even a ``Producer``, under a
``type: ignore``); now they are a :class:`ConfigError` naming the class to use, raised before
any thread or socket starts. The towers below are a closed port with short timeouts, so the
old behaviour (a client that tries to join) fails fast instead of passing.
"""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path
from typing import Any

import pytest

import dafka
from dafka import (
    AsyncConsumer,
    AsyncProducer,
    ConfigError,
    Consumer,
    ConsumerSettings,
    Producer,
    ReadCommittedConsumer,
    TransactionalProducer,
)

NOWHERE: dict[str, Any] = {"towers": "127.0.0.1:9", "ready_timeout": 0.5, "resume_timeout": 0.5}
NOWHERE_CONSUMER: dict[str, Any] = {"towers": "127.0.0.1:9", "ready_timeout": 0.5}


def test_the_exactly_once_classes_are_at_the_front_door() -> None:
    assert {"TransactionalProducer", "ReadCommittedConsumer"} <= set(dafka.__all__)
    assert issubclass(ReadCommittedConsumer, Consumer)
    assert ReadCommittedConsumer.__module__ == "dafka.client._read_committed"
    assert TransactionalProducer.__module__ == "dafka.client._transactions"


def test_producer_with_a_transactional_id_names_the_class() -> None:
    with pytest.raises(ConfigError, match=r"TransactionalProducer\(topic, transactional_id="):
        Producer("t", transactional_id="w", **NOWHERE)


def test_async_producer_with_a_transactional_id_names_the_class() -> None:
    with pytest.raises(ConfigError, match="TransactionalProducer"):
        AsyncProducer("t", transactional_id="w", **NOWHERE)


def test_consumer_reading_committed_names_the_class(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"ReadCommittedConsumer\(topics"):
        Consumer("t", isolation_level="read_committed", **NOWHERE_CONSUMER)
    shared = ConsumerSettings(isolation_level="read_committed", **NOWHERE_CONSUMER)
    with pytest.raises(ConfigError, match="ReadCommittedConsumer"):
        Consumer("t", settings=shared)
    config = tmp_path / "dafka.toml"
    config.write_text('towers = "127.0.0.1:9"\n[consumer]\nisolation = "read_committed"\n')
    with pytest.raises(ConfigError, match="ReadCommittedConsumer"):
        Consumer("t", config_file=config, ready_timeout=0.5)


def test_read_committed_consumer_refuses_to_read_uncommitted() -> None:
    with pytest.raises(ConfigError, match="Consumer for every message"):
        ReadCommittedConsumer("t", isolation_level="read_uncommitted", **NOWHERE_CONSUMER)


def test_async_consumer_wraps_the_class_its_settings_name() -> None:
    """AsyncConsumer is one class whatever it wraps: the blocking consumer inside follows
    ``isolation_level`` (typed Consumer, which both are), and a bad value fails when built."""
    with pytest.raises(ConfigError, match="isolation_level"):
        AsyncConsumer("t", isolation_level="serializable", **NOWHERE_CONSUMER)
    plain = AsyncConsumer("t", **NOWHERE_CONSUMER)
    committed = AsyncConsumer("t", isolation_level="read_committed", **NOWHERE_CONSUMER)
    assert plain._make.func is Consumer
    assert committed._make.func is ReadCommittedConsumer
    asyncio.run(plain.close())
    asyncio.run(committed.close())


def _imports(module: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_the_base_clients_know_nothing_of_their_exactly_once_classes() -> None:
    """No import cycle: the exactly-once classes import the base clients, never the reverse
    (the old ``__new__`` imported them back inside the function)."""
    client = Path(dafka.__file__).parent / "client"
    for base in ("_producer.py", "_consumer.py"):
        imported = _imports(client / base)
        assert "dafka.client._transactions" not in imported, base
        assert "dafka.client._read_committed" not in imported, base
