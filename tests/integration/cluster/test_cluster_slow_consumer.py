"""A slow consumer holds up neither the producer nor the store, and memory stays bounded.

A consumer process reads at a fixed 8,000 records/s with ``max_queued`` 2,000 (its runner
stops reading the sockets while the application is behind), while a producer process
publishes 60,000 records at 20,000/s. Stores ACK what they persisted, whatever consumers do:
the producer has every record ACKed, flushes and exits while the consumer is still far
behind, and the resident memory of the store, the producer and the consumer stays under a
generous bound. The consumer still ends with every record once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.cluster.cluster_procs import DEADLINE, Processes, wait_until

TOPIC = "slow"
RECORDS = 60_000
RSS_BOUND_KB = 250_000
"""Far above a node's ~40 MB at rest, far below what buffering everything several times costs."""


@pytest.mark.timeout(180)
def test_slow_consumer_does_not_grow_producer_or_store(procs: Processes, tmp_path: Path) -> None:
    tower = procs.tower()
    store = procs.store(tmp_path / "store", [tower])
    consumer = procs.client(
        "consumer", "consume", [tower], TOPIC,
        "--expect", str(RECORDS), "--rate", "8000", "--max-queued", "2000", "--batch", "200",
    )  # fmt: skip
    consumer.wait_event("ready")
    producer = procs.client(
        "producer", "produce", [tower], TOPIC, "--records", str(RECORDS), "--rate", "20000"
    )
    store_peak = 0

    def producer_done() -> bool:
        nonlocal store_peak
        store_peak = max(store_peak, store.proc.rss_kb())
        return not producer.running()

    wait_until(producer_done, "the producer to exit")
    assert producer.wait_exit() == 0, procs.describe()
    done = producer.require("done")
    assert done["acked"] == RECORDS
    # Stores ACK at their own pace: every record was ACKed while the consumer was still far
    # behind. (Not a bound on the producer's peak of unacked records: that is the store's
    # speed, not its policy - a store starved of CPU left 16,491 unacked at load 17 and
    # 31,484 at load ~30, more than ACKs held to the consumer's pace would leave on a quiet
    # machine, ~36,000 less the store's lag.)
    behind = consumer.require("progress")["received"]
    assert behind < RECORDS * 0.9, f"the consumer was not slow ({behind} read): nothing shown"
    assert done["rss_kb"] < RSS_BOUND_KB

    def consumer_done() -> bool:
        nonlocal store_peak
        store_peak = max(store_peak, store.proc.rss_kb())
        return not consumer.running()

    wait_until(consumer_done, "the slow consumer to read everything", DEADLINE)
    assert consumer.wait_exit() == 0, procs.describe()
    result = consumer.require("done")
    assert result["received"] == RECORDS
    assert result["errors"] == 0, result["error_list"]
    consumer_peak = max(e.get("rss_kb", 0) for e in consumer.events())
    assert consumer_peak < RSS_BOUND_KB
    assert 0 < store_peak < RSS_BOUND_KB
