"""A read-committed view of a topic's stored messages, by Gazette's rules (pure).

The connector's sink writes exactly-once with Gazette transactions: a task's messages are
stored at once and become visible only when the driver's commit (an ACK) follows; a rolled
back attempt stays in the log, unacknowledged. The read-committed consumer (issue 10) is not
built yet, so the checks apply the rules themselves: each partition's messages, in log
order, go through :class:`dafka.message.Sequencer`, and what it commits (ACKs left out) is
what a read-committed reader delivers.
"""

from __future__ import annotations

import uuid as uuid_mod
from collections import defaultdict
from collections.abc import Iterable

from dafka.client import Record
from dafka.message import NIL_UUID, Envelope, Flags, Sequencer, get_flags


class _Message:
    __slots__ = ("uuid", "value")

    def __init__(self, uid: uuid_mod.UUID, value: bytes) -> None:
        self.uuid = uid
        self.value = value

    def new_acknowledgement(self, partition: str) -> _Message:
        del partition
        return _Message(NIL_UUID, b"")


def committed_values(records: Iterable[Record]) -> list[bytes]:
    """The values a read-committed reader delivers, each partition in log order.

    A message without a UUID (written outside a transaction) is committed as it is.
    """
    by_partition: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for record in records:
        by_partition[(record.topic, record.partition)].append(record)
    out: list[bytes] = []
    for (topic, partition), part in sorted(by_partition.items()):
        sequencer: Sequencer[_Message] = Sequencer(buffer=1 << 20)
        name = f"{topic}/{partition}"
        for record in sorted(part, key=lambda r: (r.offset, r[3])):
            if record.uuid is None:
                out.append(record.value)
                continue
            uid = uuid_mod.UUID(bytes=bytes(record.uuid))
            begin = record.offset << 32 | record[3]
            sequencer.queue_uncommitted(
                Envelope(name, begin, begin + 1, _Message(uid, record.value))
            )
            while (envelope := sequencer.step()) is not None:
                if get_flags(envelope.message.uuid) != Flags.ACK_TXN:
                    out.append(envelope.message.value)
    return out


__all__ = ["committed_values"]
