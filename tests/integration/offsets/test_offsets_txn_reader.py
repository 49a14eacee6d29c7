"""Reading a group's transactional commits on a real cluster: each transaction is decided
by its own INTENT slot in its log, also when the group's last commit records name several
transactions of one log (instances of one transactional id: a member restarted with its id;
docs/groups.md, "Exactly-once: offsets in a transaction").

In-process clients; the module's cluster is shared (each test its own group and topic).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from dafka import CommittedOffset, Consumer, LocalCluster, Producer, TransactionalProducer
from dafka.records import OFFSETS_TOPIC, CommitRecord, TxnRef, commit_partition, encode_commit


class _CrashError(Exception):
    """The instance stops between its commit record and its INTENT."""


def _crash(_: Sequence[tuple[str, str]]) -> None:
    raise _CrashError


def _commit_in_txn(
    cluster: LocalCluster, group: str, key: tuple[str, str], offset: int, *, crash: bool = False
) -> None:
    """One instance of the transactional id ``txr-loop`` sends ``key`` at ``offset`` in its
    first transaction with one output message and commits it (``crash``: it stops before
    the INTENT - its commit record stored, its transaction never decided by it)."""
    with TransactionalProducer(
        "txr-out",
        "txr-loop",
        towers=cluster.towers,
        beacon_interval=0.2,
        intent_fault=_crash if crash else None,
    ) as producer:
        producer.begin_transaction()
        producer.send(b"out-%d" % offset)
        producer.send_offsets_to_transaction({key: offset}, group)
        if crash:
            with pytest.raises(_CrashError):
                producer.commit_transaction()
        else:
            producer.commit_transaction()


def test_each_transaction_of_one_log_is_decided_by_its_own_intent_slot(
    cluster: LocalCluster,
) -> None:
    """A first instance of a transactional id sends ``a`` at 10 and stops before its INTENT;
    the next instance commits ``b`` at 20. Both transactions are a transaction 0 of the
    same log, at different slots: ``a`` is not committed, ``b`` is. Before, the reader
    read one slot per log for every open transaction of it and judged both by it (the
    EPOCH at the first slot: ``b`` not committed either, or the second's INTENT, whose
    transaction number 0 matched: ``a`` committed at 10 - its inputs skipped)."""
    group = "g-txr"
    first, second = ("txr-in", "a.0"), ("txr-in", "b.0")
    _commit_in_txn(cluster, group, first, 10, crash=True)
    _commit_in_txn(cluster, group, second, 20)
    with Consumer(
        towers=cluster.towers, beacon_interval=0.2, group_id=group, assign={first: 0, second: 0}
    ) as reader:
        found = reader.committed([first, second], timeout=20)
    offsets = {k: v.offset if isinstance(v, CommittedOffset) else v for k, v in found.items()}
    assert offsets == {first: None, second: 20}


def test_a_commit_record_naming_a_slot_below_zero_is_skipped_as_corrupt(
    cluster: LocalCluster,
) -> None:
    """A peer's commit record whose transaction names slot -1 of a log (no writer of ours
    sends one) is a corrupt record: skipped and counted, the group's other commits read.
    Before, the reader asked the log for record -1 (every head is >= -1) and the reading
    consumer's ConfigError came out of ``committed()`` - every member's take raised it."""
    group = "g-txr-forged"
    good, forged = ("txr-in", "good.0"), ("txr-in", "forged.0")
    record = CommitRecord(
        group,
        "hostile",
        {forged: CommittedOffset(99, 0, 1)},
        TxnRef("txr-loop~.0", -1, 0),
    )
    with Producer(
        OFFSETS_TOPIC,
        towers=cluster.towers,
        beacon_interval=0.2,
        name=commit_partition(group, "forged")[:-2],
        partitions=1,
        batching=False,
    ) as writer:
        writer.send(encode_commit(record))
        assert writer.flush(30) == 0
    with Consumer(
        towers=cluster.towers, beacon_interval=0.2, group_id=group, assign={good: 0, forged: 0}
    ) as member:
        member.commit({good: 7})
        found = member.committed([good, forged], timeout=20)
    offsets = {k: v.offset if isinstance(v, CommittedOffset) else v for k, v in found.items()}
    assert offsets == {good: 7, forged: None}
