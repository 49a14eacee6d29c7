"""StoreMachine over the real storage engine: persist, durable ACKs, restart, serve."""

from __future__ import annotations

from pathlib import Path

from dafka.node import Persist, RecordReader, Send, SendDirectRecords, StoreMachine
from dafka.protocol import Ack, DataMessage, DirectRecord, Fetch, Record
from dafka.storage import Storage


def drive(store: StoreMachine, storage: Storage, *messages: DataMessage) -> list[DataMessage]:
    """A minimal store driver: feed a batch, persist, report durability, collect sends."""
    for message in messages:
        store.on_message(message, 0.0)
    sent: list[DataMessage] = []
    for _ in range(2):  # the second drain carries the ACKs of what became durable
        for action in store.take_actions():
            if isinstance(action, Persist):
                storage.append(
                    action.topic, action.producer, action.first_sequence, action.contents
                )
            elif isinstance(action, Send):
                sent.append(action.message)
            elif isinstance(action, SendDirectRecords):
                sent.extend(action.messages())
        storage.flush()
        for (topic, partition), durable in storage.take_durable_advances().items():
            store.on_durable(topic, partition, durable, 0.0)
    return sent


def test_store_on_real_storage_acks_durable_records_and_recovers(tmp_path: Path) -> None:
    storage = Storage.open(tmp_path / "db")
    reader: RecordReader = storage  # the engine satisfies the machine's read protocol
    store = StoreMachine("WRITER", "READER", reader)
    store.take_actions()
    sent = drive(store, storage, *(Record("hello", "P", s, b"r%d" % s) for s in range(100)))
    assert sent == [Ack("P", "hello", 99)]
    storage.close()

    storage = Storage.open(tmp_path / "db")
    restarted = StoreMachine("WRITER", "READER", storage)
    assert restarted.durable_heads() == {("hello", "P"): 99}
    restarted.take_actions()
    sent = drive(restarted, storage, Fetch("P", "CONSUMER", "hello", 95, 10))
    assert sent == [DirectRecord("CONSUMER", "hello", "P", s, b"r%d" % s) for s in range(95, 100)]
    sent = drive(
        restarted, storage, Record("hello", "P", 99, b"dup"), Record("hello", "P", 100, b"new")
    )
    assert sent == [Ack("P", "hello", 100)]
    assert storage.read("hello", "P", 99, 5) == [(99, b"r99"), (100, b"new")]
    storage.close()
