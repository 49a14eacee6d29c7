"""A read-committed view of rows read by the dafka source, by Gazette's rules.

The test oracle for the exactly-once sink: the rows of each partition, in log order, go
through ``dafka.message.Sequencer``; what it commits (ACKs left out) is what a
read-committed consumer sees.
"""

from __future__ import annotations

import uuid as uuid_mod
from collections import defaultdict
from collections.abc import Iterable

from pyspark.sql import Row

from dafka.message import NIL_UUID, Envelope, Flags, Sequencer, get_flags


class _Msg:
    __slots__ = ("uuid", "value")

    def __init__(self, uid: uuid_mod.UUID, value: bytes) -> None:
        self.uuid = uid
        self.value = value

    def new_acknowledgement(self, partition: str) -> _Msg:
        return _Msg(NIL_UUID, b"")


def committed_values(rows: Iterable[Row]) -> list[bytes]:
    """Values a read-committed reader delivers, each partition read in log order."""
    by_partition: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for r in rows:
        by_partition[(r.topic, r.partition)].append(r)
    out: list[bytes] = []
    for (topic, partition), part in sorted(by_partition.items()):
        seq: Sequencer[_Msg] = Sequencer(buffer=1 << 20)
        name = f"{topic}/{partition}"
        for r in sorted(part, key=lambda r: (r.offset, r["index"])):
            uid = NIL_UUID if r.uuid is None else uuid_mod.UUID(bytes=bytes(r.uuid))
            begin = r.offset << 32 | r["index"]
            seq.queue_uncommitted(Envelope(name, begin, begin + 1, _Msg(uid, bytes(r.value))))
            while (env := seq.step()) is not None:
                if get_flags(env.message.uuid) != Flags.ACK_TXN:
                    out.append(env.message.value)
    return out
