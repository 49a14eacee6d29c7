"""The shared transaction log ``tid~.0`` on a real cluster: records that do not decode.

One rule (``dafka.records.decode_at``, docs/exactly-once.md "Recovery"): a record of the
shared log that does not decode is never skipped - it may be an INTENT (a commit point) or
a later instance's EPOCH - so a running instance that reads one stops (as fenced, the
record named), and a starting instance raises ``CorruptLogError`` naming it.
"""

from __future__ import annotations

import time

import pytest

from dafka.client import TransactionalProducer, TransactionState
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
