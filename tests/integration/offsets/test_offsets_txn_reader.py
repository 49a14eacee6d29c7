"""Reading a group's transactional commits on a real cluster: each transaction is decided
by its own INTENT slot in its log, also when the group's last commit records name several
transactions of one log (instances of one transactional id: a member restarted with its id;
docs/groups.md, "Exactly-once: offsets in a transaction").

In-process clients; the module's cluster is shared (each test its own group and topic).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from dafka import CommittedOffset, Consumer, LocalCluster, TransactionalProducer


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
