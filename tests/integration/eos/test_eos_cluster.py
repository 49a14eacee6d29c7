"""Exactly-once on a real cluster: producers and pipelines SIGKILLed, zombies fenced.

The cluster (tower and two stores) runs in its own processes; the programs under test run
as processes of ``eos_app.py`` and are killed with SIGKILL. Read-committed readers then show
what an application would see.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import dafka
from dafka import BackpressureError
from dafka.client import (
    Consumer,
    DeliveryError,
    Producer,
    ReadCommittedConsumer,
    RunFencedError,
    TransactionalProducer,
    TransactionState,
)
from dafka.errors import MessageTooLargeError
from dafka.message import Clock, Flags, build_uuid, new_producer_id
from dafka.records import (
    TXN_TOPIC,
    EpochRecord,
    IntentRecord,
    ProducerFencedError,
    Record,
    RecordMetadata,
    TransactionError,
    ack_uuid,
    encode_batch,
    encode_record,
)
from dafka.server import LocalCluster
from tests.integration.cluster.cluster_procs import Proc, Processes
from tests.integration.loopback import loopback_client

pytestmark = pytest.mark.integration

APP = str(Path(__file__).with_name("eos_app.py"))
DEADLINE = 60.0


def common(cluster: LocalCluster) -> dict[str, Any]:
    return loopback_client(cluster.towers, 30.0)


def app(procs: Processes, name: str, cluster: LocalCluster, *args: str) -> Proc:
    return procs.spawn(name, [sys.executable, APP, *args, "--towers", cluster.towers])


def read_all(cluster: LocalCluster, topic: str, *, committed: bool, expect: int) -> list[Record]:
    """Everything readable of ``topic``: at least ``expect`` messages, then quiet and at end.

    Read committed, it reads twice, with ``poll`` and with ``poll_columns``, and holds both to
    the same rows in the same order in each partition."""
    got = _read_all(cluster, topic, committed=committed, expect=expect, columns=False)
    if committed:
        as_columns = _read_all(cluster, topic, committed=True, expect=expect, columns=True)
        assert _by_partition(as_columns) == _by_partition(got)
    return got


def _by_partition(records: list[Record]) -> dict[str, list[Record]]:
    out: dict[str, list[Record]] = {}
    for record in records:
        out.setdefault(record.partition, []).append(record)
    return out


def _read_all(
    cluster: LocalCluster, topic: str, *, committed: bool, expect: int, columns: bool
) -> list[Record]:
    kind = ReadCommittedConsumer if committed else Consumer
    with kind([topic], offset_reset="earliest", **common(cluster)) as consumer:
        got: list[Record] = []
        quiet = time.monotonic()
        deadline = time.monotonic() + DEADLINE
        while True:
            records = consumer.poll_columns(0.1).records() if columns else consumer.poll(0.1)
            now = time.monotonic()
            if records:
                got += records
                quiet = now
            if len(got) >= expect and now - quiet > 1.5 and consumer.at_end():
                return got
            if now > deadline:
                raise AssertionError(f"read {len(got)} of {expect} from {topic}")


def values(records: list[Record]) -> list[bytes]:
    return [r.value for r in records if r.value]


def test_a_producer_killed_mid_transaction_never_shows_it(
    cluster: LocalCluster, procs: Processes
) -> None:
    writer = app(
        procs, "writer", cluster, "writer", "--tid", "w1", "--topic", "t1", "--mode", "mid-txn"
    )
    writer.wait_event("sent_b", timeout=DEADLINE)
    writer.kill()
    # B is in the log (read uncommitted shows it) ...
    raw = values(read_all(cluster, "t1", committed=False, expect=20))
    assert sorted(v for v in raw if v.startswith(b"B-")) == sorted(b"B-%d" % i for i in range(10))
    # ... but read committed shows A exactly once and no B.
    expected = sorted(b"A-%d" % i for i in range(10))
    assert sorted(values(read_all(cluster, "t1", committed=True, expect=10))) == expected
    # The successor rolls B back for good; its own transaction is seen, A still once.
    with TransactionalProducer("t1", "w1", partitions=3, txn_lease=1.0, **common(cluster)) as p:
        assert len(p.resolved) == 1
        with p.transaction():
            p.send(b"D-0", key=b"0")
    got = values(read_all(cluster, "t1", committed=True, expect=11))
    assert sorted(got) == sorted([*expected, b"D-0"])


@pytest.mark.parametrize("acks_before_kill", [1, 2])
def test_a_producer_killed_mid_commit_is_finished_by_its_successor(
    cluster: LocalCluster, procs: Processes, acks_before_kill: int
) -> None:
    tid, topic = f"w2-{acks_before_kill}", f"t2-{acks_before_kill}"
    writer = app(
        procs,
        "writer",
        cluster,
        "writer",
        "--tid",
        tid,
        "--topic",
        topic,
        "--mode",
        "commit",
        "--kill-after-acks",
        str(acks_before_kill),
    )
    writer.wait_event("committing_c", timeout=DEADLINE)
    assert writer.wait_exit(DEADLINE) == -signal.SIGKILL
    assert writer.last("committed_c") is None
    expected = sorted(b"C-%d" % i for i in range(12))
    half = values(read_all(cluster, topic, committed=True, expect=1))
    assert 0 < len(half) < 12  # some partitions got their ACK: a prefix in time
    with TransactionalProducer(topic, tid, partitions=3, txn_lease=1.0, **common(cluster)) as p:
        assert len(p.resolved) == 1
    assert sorted(values(read_all(cluster, topic, committed=True, expect=12))) == expected


def test_a_zombie_is_fenced_and_cannot_commit(cluster: LocalCluster) -> None:
    settings = {"partitions": 2, "txn_lease": 2.0, **common(cluster)}
    zombie = dafka.TransactionalProducer("t3", transactional_id="w3", **settings)  # front door
    try:
        with zombie.transaction():
            zombie.send(b"Z-ok", key=b"1")
        zombie.begin_transaction()
        zombie.send(b"Z-lost", key=b"2")
        with TransactionalProducer("t3", "w3", **settings) as successor:
            with pytest.raises(ProducerFencedError):
                zombie.commit_transaction()
            with pytest.raises(ProducerFencedError):
                zombie.send(b"Z-after")
            with successor.transaction():
                successor.send(b"S-ok", key=b"3")
        got = values(read_all(cluster, "t3", committed=True, expect=2))
        assert sorted(got) == [b"S-ok", b"Z-ok"]
    finally:
        zombie.close()


def test_a_paused_zombie_is_fenced_without_a_lease(cluster: LocalCluster, procs: Processes) -> None:
    """SIGSTOP the instance with B open, start its successor, SIGCONT: the successor is ready
    without waiting its lease (600 s here), the zombie's commit of B fails with
    ProducerFencedError, and readers see A once, the successor's S, and no B."""
    zombie = procs.spawn(
        "zombie",
        [
            sys.executable,
            APP,
            "writer",
            "--tid",
            "w5",
            "--topic",
            "t5",
            "--mode",
            "zombie",
            "--towers",
            cluster.towers,
        ],
        stdin=True,
    )
    zombie.wait_event("sent_b", timeout=DEADLINE)
    zombie.send_signal(signal.SIGSTOP)
    try:
        ready: list[TransactionalProducer] = []
        starter = threading.Thread(
            target=lambda: ready.append(
                TransactionalProducer("t5", "w5", partitions=3, txn_lease=600.0, **common(cluster))
            ),
            daemon=True,
        )
        starter.start()
        starter.join(DEADLINE)  # before: it waited its txn_lease (600 s) for the zombie
        assert ready, "the successor was not ready: it waited for the paused zombie"
        successor = ready[0]
        with successor:
            assert len(successor.resolved) == 1
            with successor.transaction():
                successor.send(b"S-ok", key=b"1")
            zombie.send_signal(signal.SIGCONT)
            zombie.send_line("commit")
            fenced = zombie.wait_event("fenced", timeout=DEADLINE)
            assert fenced["error"] == "ProducerFencedError", fenced
            assert zombie.wait_event("refused", timeout=DEADLINE)["error"] == "ProducerFencedError"
            assert zombie.last("committed_b") is None
            zombie.wait_event("closed", timeout=DEADLINE)
            with successor.transaction():
                successor.send(b"S-after", key=b"2")
    finally:
        zombie.send_signal(signal.SIGCONT)
    got = values(read_all(cluster, "t5", committed=True, expect=12))
    assert sorted(got) == sorted([*(b"A-%d" % i for i in range(10)), b"S-ok", b"S-after"])


def test_an_instance_of_the_earlier_log_layout_is_resolved_after_one_lease(
    cluster: LocalCluster,
) -> None:
    """An upgrade: the predecessor wrote the earlier layout (a log partition of its own,
    ``f"{tid}~{nonce}.0"``, whose records name no run: no store can fence it). The new
    instance finds it, waits one lease, keeps its committed transaction and rolls back its
    open one."""
    tid, topic = "w6", "t6"
    parts = (f"{tid}.0", f"{tid}.1")
    p_txn, p_out = new_producer_id(), new_producer_id()
    clock = Clock()
    clock.update()
    c0 = clock.tick()

    def txn_batch(value: bytes, flags: Flags) -> bytes:
        return encode_batch([value], uuids=[build_uuid(p_txn, clock.tick(), flags).bytes])

    settings = common(cluster)
    with (
        Producer(TXN_TOPIC, name=f"{tid}~old", resume=False, batching=False, **settings) as log,
        Producer(topic, name=tid, partitions=2, batching=False, **settings) as data,
    ):
        key = {data.partition_for(k): k for k in (b"%d" % i for i in range(20))}
        epoch = EpochRecord(1, "old", topic, parts, p_txn, p_out, c0)
        log.send(encode_record(epoch)).result(30)
        for partition in parts:  # the opening ACKs
            data.send(encode_batch([b""], uuids=[ack_uuid(p_txn, c0)]), key=key[partition])
        data.send(txn_batch(b"old-ok", Flags.CONTINUE_TXN), key=key[parts[0]])
        ack = ack_uuid(p_txn, clock.tick())
        log.send(encode_record(IntentRecord(0, ((parts[0], ack),)))).result(30)
        data.send(encode_batch([b""], uuids=[ack]), key=key[parts[0]])
        data.send(txn_batch(b"old-open", Flags.CONTINUE_TXN), key=key[parts[1]])
        assert data.flush(30) == 0
    with TransactionalProducer(topic, tid, partitions=2, txn_lease=1.0, **settings) as p:
        assert p.resolved == [f"{tid}~old.0"]
        with p.transaction():
            p.send(b"new-ok", key=b"1")
    assert sorted(values(read_all(cluster, topic, committed=True, expect=2))) == [
        b"new-ok",
        b"old-ok",
    ]


def test_pipeline_killed_at_random_points_outputs_each_message_exactly_once(
    cluster: LocalCluster, procs: Processes
) -> None:
    # enough work that a run is still busy when it is killed: a commit takes one store
    # round trip less since the ACKs are stored in the background, and a run once did
    # all 300 messages of the old figure before its kill came
    total = 900
    with Producer("in", name="source", partitions=2, batching=False, **common(cluster)) as source:
        for i in range(total):
            source.send(b"%d" % i, key=b"%d" % i)
        assert source.flush(30) == 0
    rng = random.Random(10)
    args = ["pipeline", "--tid", "pipe", "--input", "in", "--output", "out", "--total", str(total)]
    args += ["--txn-size", "7"]
    kills = 0
    while True:
        proc = app(procs, "pipeline", cluster, *args)
        if kills < 3:
            proc.wait_event("txn", timeout=DEADLINE)
            time.sleep(rng.uniform(0.0, 0.6))  # a random point of its work, not a wait for state
            proc.kill()
            kills += 1
            if kills == 2:  # and a store dies too (the cluster restarts it)
                store = cluster.member("store-0")
                assert store.pid is not None
                os.kill(store.pid, signal.SIGKILL)
            continue
        proc.wait_event("finished", timeout=120)
        break
    got = [
        v
        for v in values(read_all(cluster, "out", committed=True, expect=total))
        if v.startswith(b"out-")
    ]
    counts = Counter(got)
    assert {v for v, n in counts.items() if n > 1} == set()
    assert set(counts) == {b"out-%d" % i for i in range(total)}


def test_flush_inside_a_transaction_stores_without_committing(cluster: LocalCluster) -> None:
    """As in Kafka: flush() in a transaction waits until what was sent is stored (futures
    resolved, read-uncommitted readers see it) and commits nothing (read-committed readers
    see it only after commit_transaction)."""
    topic = "t-flush"
    sent = sorted(b"F-%d" % i for i in range(6))
    with TransactionalProducer(
        topic, "wf", partitions=2, txn_lease=1.0, batch_size=1 << 20, **common(cluster)
    ) as p:
        p.begin_transaction()
        futures = [p.send(v, key=v) for v in sent]
        assert p.flush(DEADLINE) == 0
        assert [f.result(0).topic for f in futures] == [topic] * len(sent)
        assert p.state.name == "IN_TRANSACTION"
        assert sorted(values(read_all(cluster, topic, committed=False, expect=6))) == sent
        assert values(read_all(cluster, topic, committed=True, expect=0)) == []
        p.commit_transaction()
        assert p.state.name == "READY"
    assert sorted(values(read_all(cluster, topic, committed=True, expect=6))) == sent


def test_a_call_the_state_does_not_allow_names_the_state(cluster: LocalCluster) -> None:
    with TransactionalProducer(
        "t-calls", "wc", partitions=1, txn_lease=1.0, **common(cluster)
    ) as p:
        with pytest.raises(TransactionError, match=r"commit_transaction\(\) in state READY"):
            p.commit_transaction()
        with pytest.raises(TransactionError, match=r"commit_transaction\(\) in state READY"):
            p.commit_transaction_nowait()
        with pytest.raises(TransactionError, match=r"abort_transaction\(\) in state READY"):
            p.abort_transaction()
        p.begin_transaction()
        with pytest.raises(
            TransactionError, match=r"begin_transaction\(\) in state IN_TRANSACTION"
        ):
            p.begin_transaction()
        p.abort_transaction()
        assert p.state.name == "READY"
    with pytest.raises(TransactionError, match=r"send\(\) in state CLOSED"):
        p.send(b"late")


def test_produce_many_and_produce_in_transactions_commit_abort_and_report_each_message(
    cluster: LocalCluster,
) -> None:
    """The producer's fast calls inside transactions (issue 25): what a committed
    transaction sent with ``produce_many``/``produce`` is read once, an aborted one never,
    keyless messages of a transaction share one partition, and ``on_delivery`` hears of each
    message exactly once (stored, or failed by the abort)."""
    topic = "t-many"
    reports: list[tuple[RecordMetadata | None, BaseException | None]] = []
    committed = [b"K-%d" % i for i in range(500)]
    keyless = [b"N-%d" % i for i in range(40)]
    singles = [b"S-%d" % i for i in range(5)]
    aborted = [b"A-%d" % i for i in range(300)]
    outside = [b"O-%d" % i for i in range(3)]
    with TransactionalProducer(
        topic,
        "wmany",
        partitions=3,
        txn_lease=1.0,
        batch_size=4096,  # RECORDs leave during the transaction too
        on_delivery=lambda meta, error: reports.append((meta, error)),
        **common(cluster),
    ) as p:
        with p.transaction():
            p.produce_many(committed, committed)
            p.produce_many(keyless)
            for v in singles:
                p.produce(v, key=v)
        p.begin_transaction()
        p.produce_many(aborted, aborted)
        p.abort_transaction()
        p.produce_many(outside, outside)
        assert p.flush(DEADLINE) == 0
    got = read_all(cluster, topic, committed=True, expect=548)
    assert Counter(values(got)) == Counter(committed + keyless + singles + outside)
    assert len({r.partition for r in got if r.value.startswith(b"N-")}) == 1
    by_partition: dict[str, list[bytes]] = {}
    for r in got:
        by_partition.setdefault(r.partition, []).append(r.value)
    for got_values in by_partition.values():  # a partition keeps the order of the calls
        mine = [v for v in got_values if v.startswith(b"K-")]
        assert mine == sorted(mine, key=lambda v: int(v[2:]))
    assert len(reports) == 548 + 300
    stored = [meta for meta, error in reports if error is None]
    assert all(meta is not None and meta.topic == topic for meta in stored)
    assert {type(error) for _, error in reports if error is not None} <= {TransactionError}
    assert len(stored) >= 548


def test_produce_many_cuts_its_records_at_max_message_bytes(cluster: LocalCluster) -> None:
    """A transaction's messages of one partition fill RECORDs up to ``max_message_bytes``
    and no further; a message that cannot fit any RECORD is refused with nothing queued."""
    topic = "t-cut"
    big = [b"%04d" % i + bytes(6000) for i in range(40)]
    with TransactionalProducer(
        topic,
        "wcut",
        partitions=2,
        txn_lease=1.0,
        max_message_bytes=32 * 1024,
        **common(cluster),
    ) as p:
        with pytest.raises(MessageTooLargeError, match="message 1 of produce_many"):
            p.produce_many([b"x", bytes(40 * 1024)])
        with p.transaction():
            p.produce_many(big, [b"one-key"] * len(big))
    got = read_all(cluster, topic, committed=True, expect=len(big))
    assert values(got) == big
    offsets = {r.offset for r in got}
    assert len(offsets) >= 40 * 6000 // (32 * 1024)  # several RECORDs


def test_pipelined_commits_are_each_atomic_and_aborts_between_them_roll_back(
    cluster: LocalCluster,
) -> None:
    """``commit_transaction_nowait`` (issue 25): transactions committed while earlier
    commits are in flight (decided together by one INTENT), aborts and synchronous commits
    between them, and messages outside transactions: read committed shows exactly the
    committed ones, each once, in each partition in the order of their transactions."""
    topic = "t-nowait"
    futures = []
    expected: list[bytes] = []
    with TransactionalProducer(
        topic, "wnowait", partitions=3, txn_lease=1.0, batch_size=2048, **common(cluster)
    ) as p:
        for txn in range(40):
            batch = [b"P%02d-%02d" % (txn, i) for i in range(30)]
            p.begin_transaction()
            p.produce_many(batch, [b"%d" % i for i in range(30)])
            if txn % 9 == 4:
                p.abort_transaction()
                continue
            expected += batch
            if txn % 9 == 7:
                p.commit_transaction()
            else:
                futures.append(p.commit_transaction_nowait())
            if txn % 13 == 0:
                p.produce_many([b"Q%02d" % txn], [b"q"])
                expected.append(b"Q%02d" % txn)
        for future in futures:
            future.result(DEADLINE)
        p.begin_transaction()
        assert p.commit_transaction_nowait().result(DEADLINE) is None  # nothing written
    got = read_all(cluster, topic, committed=True, expect=len(expected))
    assert Counter(values(got)) == Counter(expected)
    by_partition: dict[str, list[bytes]] = {}
    for r in got:
        if r.value.startswith(b"P"):
            by_partition.setdefault(r.partition, []).append(r.value)
    for in_partition in by_partition.values():
        assert in_partition == sorted(in_partition)


def test_a_group_of_pipelined_transactions_shares_records_and_each_is_read_once(
    cluster: LocalCluster,
) -> None:
    """Pipelined commits decided by one INTENT (a group) put their transactions' messages in
    shared RECORDs (issue 25: RECORDs of a whole group, not of one transaction, per
    partition), cut where the group's ACK goes - also when a RECORD fills or a message
    outside a transaction leaves while the commits wait: read committed shows each
    committed message once and nothing of the aborted one, ``send``'s futures name where
    each message was stored, and ``on_delivery`` hears of every message once."""
    topic = "t-group"
    reports: list[tuple[RecordMetadata | None, BaseException | None]] = []
    expected: list[bytes] = []
    sent: list[tuple[bytes, Any]] = []
    futures = []
    with TransactionalProducer(
        topic,
        "wgroup",
        partitions=2,
        txn_lease=1.0,
        batch_size=1024,  # RECORDs fill while the commits wait, mid-transaction too
        on_delivery=lambda meta, error: reports.append((meta, error)),
        **common(cluster),
    ) as p:
        # The committer takes requests under the producer's lock: holding it, every request
        # below waits for one take - one group, deterministically.
        with p._lock:
            for txn in range(20):
                batch = [b"G%02d-%02d" % (txn, i) for i in range(12)]
                p.begin_transaction()
                p.produce_many(batch, [b"%d" % i for i in range(12)])
                one = b"G%02d-s" % txn
                sent.append((one, p.send(one, key=b"s%d" % txn)))
                expected += [*batch, one]
                futures.append(p.commit_transaction_nowait())
                if txn % 7 == 3:  # outside a transaction: its own RECORD, cut from the rest
                    p.produce_many([b"O%02d" % txn], [b"1"])
                    expected.append(b"O%02d" % txn)
        # Then groups of one, each taken while the next transaction's messages (or one
        # outside a transaction) already left its RECORDs: they are cut at its ACK.
        p.begin_transaction()
        for txn in range(20, 26):
            batch = [b"G%02d-%02d" % (txn, i) for i in range(30)]
            p.produce_many(batch[:4], [b"%d" % i for i in range(4)])
            with p._lock:  # no take before the next messages fill the RECORDs
                future = p.commit_transaction_nowait()
                if txn % 2:
                    p.produce_many([b"O%02d" % txn], [b"1"])
                    expected.append(b"O%02d" % txn)
                p.begin_transaction()
                p.produce_many(batch[4:], [b"%d" % i for i in range(4, 30)])
            future.result(DEADLINE)
            expected += batch
        futures.append(p.commit_transaction_nowait())
        for future in futures:
            future.result(DEADLINE)
        p.begin_transaction()
        p.produce_many([b"A-%d" % i for i in range(30)], [b"%d" % i for i in range(30)])
        p.abort_transaction()
        with p.transaction():
            p.produce_many([b"Z-%d" % i for i in range(5)], [b"%d" % i for i in range(5)])
        expected += [b"Z-%d" % i for i in range(5)]
        assert p.flush(DEADLINE) == 0
    got = read_all(cluster, topic, committed=True, expect=len(expected))
    assert Counter(values(got)) == Counter(expected)
    raw = read_all(cluster, topic, committed=False, expect=len(expected))
    where = {(r.partition, r.offset, r.index): r.value for r in raw}
    for value, future in sent:
        meta = future.result(0)
        assert where[(meta.partition, meta.offset, meta.index)] == value
    txns_of: dict[tuple[str, int], set[bytes]] = {}
    for r in raw:
        if r.value.startswith(b"G"):
            txns_of.setdefault((r.partition, r.offset), set()).add(r.value[:3])
    assert max(len(t) for t in txns_of.values()) > 1  # a RECORD of several transactions
    assert len(reports) == len(expected) + 30
    assert sum(error is None for _, error in reports) == len(expected)


@pytest.mark.parametrize("backpressure", ["block", "error"])
def test_records_held_behind_pipelined_commits_are_bounded_in_bytes(
    cluster: LocalCluster, backpressure: str
) -> None:
    """The RECORDs sent while a pipelined commit is undecided wait in the producer, at most
    ``max_pending_commit_bytes`` of them (issue 25: not a count of requests): a call past
    the bound waits until the committer decided the commit and sent what it held
    (``"block"``), or raises ``BackpressureError`` having queued nothing (``"error"``);
    either way the producer goes on and read committed shows each committed message once.
    Holding the producer's lock keeps the committer from taking the request, so that what
    the next transaction sends is held - until a call past the bound waits (the wait
    releases the lock)."""
    bound = 16 * 1024
    topic = f"t-held-{backpressure}"
    expected: list[bytes] = []
    held: list[int] = []
    refused: list[bytes] = []
    with TransactionalProducer(
        topic,
        f"wheld-{backpressure}",
        partitions=2,
        txn_lease=1.0,
        batch_size=2048,
        max_pending_commit_bytes=bound,
        backpressure=backpressure,
        **common(cluster),
    ) as p:
        p.begin_transaction()
        first = [b"H--%03d" % i + bytes(100) for i in range(20)]
        p.produce_many(first, [b"%d" % i for i in range(20)])
        expected += first
        with p._lock:
            decided = p.commit_transaction_nowait()
            p.begin_transaction()
            for call in range(40):  # 2.7 kB a call: 108 kB held unbounded
                batch = [b"H%02d%03d" % (call, i) + bytes(100) for i in range(20)]
                try:
                    p.produce_many(batch, [b"%d" % i for i in range(20)])
                except BackpressureError:
                    refused = batch
                    break
                expected += batch
                held.append(p.pending_commit_bytes)
                if len(held) > 1 and held[-1] < held[-2]:  # this call waited for the commit
                    break
        # Past the bound by at most the open batches (a batch_size each) and one call.
        assert max(held, default=0) <= bound + 2 * 2048 + 3 * 1024
        if backpressure == "error":
            assert refused
            decided.result(DEADLINE)
            assert p.pending_commit_bytes == 0  # released with the commit's decision
            p.produce_many(refused, [b"%d" % i for i in range(20)])
            expected += refused
        else:
            assert held[-1] < held[-2]  # the call past the bound waited, then went on
            decided.result(DEADLINE)
        p.commit_transaction()
    got = read_all(cluster, topic, committed=True, expect=len(expected))
    assert Counter(values(got)) == Counter(expected)


def test_backpressure_error_at_the_in_flight_bound_loses_no_message_of_the_transaction(
    cluster: LocalCluster,
) -> None:
    """With ``backpressure="error"`` a call at the data producer's in-flight bound raises
    having queued nothing, and every message a call accepted is in the committed
    transaction. Before, the data producer raised for the RECORD a call closed - a RECORD
    holding earlier calls' messages too, dropped - and the transaction committed without
    them (3 of 400 accepted messages read committed)."""
    topic = "t-bp-error"
    expected: list[bytes] = []
    refused = 0
    with TransactionalProducer(
        topic,
        "wbp-error",
        partitions=1,
        txn_lease=1.0,
        batch_size=300,  # a RECORD of 2 messages: most calls close one
        max_in_flight=1,
        backpressure="error",
        **common(cluster),
    ) as p:
        p.begin_transaction()
        while len(expected) < 400:
            value = b"bp%05d" % len(expected) + bytes(100)
            try:
                p.send(value)
            except BackpressureError:
                refused += 1
                p.flush(DEADLINE)  # what was sent is stored: room again
                continue
            expected.append(value)
        p.commit_transaction()
    assert refused  # the bound was met
    got = read_all(cluster, topic, committed=True, expect=len(expected))
    assert Counter(values(got)) == Counter(expected)


def test_a_pipelined_commit_whose_held_record_is_refused_as_fenced_fails_its_future(
    cluster: LocalCluster,
) -> None:
    """A successor claims the id while the zombie holds RECORDs behind a pipelined commit;
    the zombie's data producer hears of it first (the stores refuse its run) and the
    zombie's committer then sends a held RECORD: the commit's future and the held messages'
    fail with ProducerFencedError. Before, the committer's thread died on the refusal,
    raised outside its error handling, and the commit's future never resolved (no result
    after 20 s). The zombie's lock, held until then, keeps its calls and watchdog from
    learning of the successor through the shared log first (the watchdog is stopped)."""
    topic = "t-fenced-held"
    settings = {"partitions": 1, "txn_lease": 2.0, "batch_size": 200, **common(cluster)}
    value = bytes(100)  # 136 bytes with its overhead: a second message closes the RECORD
    zombie = TransactionalProducer(topic, "wfenced-held", **settings)
    successor: TransactionalProducer | None = None
    try:
        zombie._stop.set()  # no watchdog: the committer meets the fence, as it may anyway
        zombie.begin_transaction()
        first = zombie.send(b"A1" + value)  # stays open
        with zombie._lock:  # the committer takes the request once this is released
            decided = zombie.commit_transaction_nowait()
            zombie.begin_transaction()
            later = zombie.send(b"B1" + value)  # cuts [A1 | B1]: both RECORDs held
            assert zombie.pending_commit_bytes
            successor = TransactionalProducer(topic, "wfenced-held", **settings)
            data = zombie._data  # made to hear of the successor: its next send raises
            assert data is not None
            try:
                probe = data.send(b"probe")  # refused by the stores, who name the newer run
            except RunFencedError:
                pass  # it heard already (the successor's opening ACKs)
            else:
                assert isinstance(probe.exception(DEADLINE), RunFencedError)
        assert isinstance(decided.exception(20.0), ProducerFencedError)
        assert isinstance(first.exception(DEADLINE), ProducerFencedError)
        assert isinstance(later.exception(DEADLINE), ProducerFencedError)
        assert zombie.pending_commit_bytes == 0
    finally:
        zombie.close()
        if successor is not None:
            successor.close()


def test_close_with_a_transaction_open_behind_a_failed_pipelined_commit_closes() -> None:
    """The only store stops answering (SIGSTOP) under a pipelined commit while the next
    transaction is open: the commit fails (what it writes is not stored within the delivery
    timeout), and close() - best effort - leaves the open transaction to the successor and
    closes. Before, close() raised ``internal error: transaction state IN_TRANSACTION cannot
    become CLOSED`` and left the producer's nodes running (under load, a zombie's close in
    test_a_pipelined_commit_whose_held_record_is_refused_as_fenced_fails_its_future)."""
    with LocalCluster(stores=1, beacon_interval=0.2) as stalled:
        settings = {**common(stalled), "partitions": 1, "delivery_timeout": 1.0}
        producer = TransactionalProducer("t-close-stalled", "close-stalled", **settings)
        try:
            producer.begin_transaction()
            producer.send(b"A1")
            stalled.kill("store-0", signal.SIGSTOP)
            decided = producer.commit_transaction_nowait()
            producer.begin_transaction()
            later = producer.send(b"B1")
            failed = decided.exception(DEADLINE)  # its data or its INTENT not stored in time
            assert isinstance(failed, (DeliveryError, TimeoutError)), failed
            states = [producer.state]
            producer.close(timeout=1.0)  # its data is not stored: no need to wait long
            states.append(producer.state)
            assert states == [TransactionState.IN_TRANSACTION, TransactionState.CLOSED]
            assert later.exception(DEADLINE) is not None  # failed, never left waiting
        finally:
            stalled.kill("store-0", signal.SIGCONT)
            producer.close()


def test_a_producer_killed_amid_pipelined_commits_leaves_whole_transactions(
    cluster: LocalCluster, procs: Processes
) -> None:
    """SIGKILLed with pipelined commits in flight and RECORDs held: after its successor
    resolved the log, read committed shows whole transactions only (20 messages each), and
    they are the first ones requested (the INTENTs are written in order)."""
    tid, topic = "w-nowait-kill", "t-nowait-kill"
    writer = app(
        procs, "writer", cluster, "writer", "--tid", tid, "--topic", topic, "--mode", "nowait"
    )
    decided = writer.wait_event("decided", lambda e: e["txn"] >= 10, timeout=DEADLINE)["txn"]
    writer.wait_event("requested", lambda e: e["txn"] >= decided + 20, timeout=DEADLINE)
    writer.kill()
    with TransactionalProducer(topic, tid, partitions=3, txn_lease=1.0, **common(cluster)):
        pass
    got = values(read_all(cluster, topic, committed=True, expect=20 * (decided + 1)))
    per_txn = Counter(int(v[1:].split(b"-")[0]) for v in got)
    assert set(per_txn.values()) == {20}
    assert sorted(per_txn) == list(range(len(per_txn)))
    assert len(per_txn) > decided
    assert len(got) == len(set(got))
