"""The shared transaction log ``tid~.0`` on a real cluster.

* A record that does not decode: one rule (``dafka.records.decode_at``, docs/exactly-once.md
  "Recovery"): never skipped - it may be an INTENT (a commit point) or a later instance's
  EPOCH - so a running instance that reads one stops (as fenced, the record named), and a
  starting instance raises ``CorruptLogError`` naming it.
* A cluster whose only store is empty: an instance is ready and fences its predecessor.
* A start reads the log back from its head until it holds its predecessor's segment, not
  every commit ever made.
"""

from __future__ import annotations

import time

import pytest

from dafka.client import TransactionalProducer, TransactionState
from dafka.client._transactions import LOG_WINDOW
from dafka.records import CorruptLogError, ProducerFencedError
from dafka.server import LocalCluster
from tests.integration.eos.test_eos_cluster import DEADLINE, common, read_all, values

pytestmark = pytest.mark.integration


def test_an_undecodable_log_record_stops_the_running_instance_and_the_next_start(
    cluster: LocalCluster,
) -> None:
    settings = {**common(cluster), "partitions": 1, "txn_lease": 0.4}
    with TransactionalProducer("corrupt-topic", "corrupt-id", **settings) as running:
        with running.transaction():
            running.send(b"v", key=b"k")
        # a record that does not decode lands in its log after its EPOCH (written here by
        # its own log producer: another live run of the log's name would share its node id,
        # docs/guarantees.md "A fenced producer"); it may have been a later instance's EPOCH
        log_producer = running._log
        assert log_producer is not None
        at = log_producer.send(b"{not a log record").result(DEADLINE).offset
        deadline = time.monotonic() + DEADLINE
        while running.state is not TransactionState.FENCED:  # its idle watchdog reads it
            assert time.monotonic() < deadline, (
                f"the running instance read record {at} of corrupt-id~.0 and went on "
                f"({running.state.name}): before, a record that does not decode was skipped"
            )
            time.sleep(0.05)
        with pytest.raises(ProducerFencedError, match=rf"record {at} of corrupt-id~\.0"):
            running.begin_transaction()
    with pytest.raises(CorruptLogError, match=rf"record {at} of corrupt-id~\.0"):
        TransactionalProducer("corrupt-topic", "corrupt-id", **settings)


def test_an_instance_on_a_cluster_whose_only_store_is_empty_is_ready_and_fences() -> None:
    """The only store holds nothing: each claim fences the log's and data partitions' names
    there (``StoreMachine._name_fences``), and the instance's own first records begin its
    run - they are taken, so it is ready within a 5 s delivery timeout, not refused by its
    own fence; its successor's claim fences it (its commit raises ProducerFencedError)."""
    with LocalCluster(stores=1, beacon_interval=0.2) as empty:
        settings = {
            **common(empty),
            "partitions": 2,
            "txn_lease": 0.4,
            "delivery_timeout": 5.0,
            "resume_timeout": 5.0,
        }
        first = TransactionalProducer("empty-topic", "empty-id", **settings)
        try:
            first.begin_transaction()
            first.send(b"first", key=b"k")
            with TransactionalProducer("empty-topic", "empty-id", **settings) as second:
                with pytest.raises(ProducerFencedError):
                    first.commit_transaction()
                with second.transaction():
                    second.send(b"second", key=b"k")
        finally:
            first.close()
        got = read_all(empty, "empty-topic", committed=True, expect=1)
        assert values(got) == [b"second"]


def test_a_start_reads_its_predecessors_segment_not_every_commit_ever_made(
    cluster: LocalCluster,
) -> None:
    """Each instance appends its EPOCH, INTENTs and RECOVERED to the shared log, which every
    new instance read whole (ready time grew with every commit ever made). Now a start reads
    back from the head only until it holds its predecessor's segment: the second instance
    reads the first one's commits (its predecessor's), the third only the second's few
    records, and both resolve correctly (what was committed is read back once)."""
    settings = {**common(cluster), "partitions": 1, "txn_lease": 0.4}
    commits = 2 * LOG_WINDOW + 50
    with TransactionalProducer("long-topic", "long-id", **settings) as first:
        for n in range(commits):
            with first.transaction():
                first.send(b"%d" % n, key=b"k")
    with TransactionalProducer("long-topic", "long-id", **settings) as second:
        assert second.log_records_read >= commits  # its predecessor's segment, all of it
        with second.transaction():
            second.send(b"second", key=b"k")
    with TransactionalProducer("long-topic", "long-id", **settings) as third:
        # before: the whole log, 2 + commits + 4 records and more each start
        assert third.log_records_read <= LOG_WINDOW
        with third.transaction():
            third.send(b"third", key=b"k")
    got = values(read_all(cluster, "long-topic", committed=True, expect=commits + 2))
    assert sorted(got) == sorted([b"%d" % n for n in range(commits)] + [b"second", b"third"])
