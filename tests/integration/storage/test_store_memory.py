"""A store's memory after a burst of one-message RECORDs (issue 23): bounded, not by how many
records went through it.

During the burst the RECORDs wait in ZeroMQ's pipes (one ``malloc`` each); once they are
stored glibc keeps the freed chunks unless the store trims its heap
(``dafka.transport.memory``, called by the store).
The store runs in its own process (``LocalCluster``); its RSS is read from ``/proc``.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from pathlib import Path

from dafka import LocalCluster
from dafka.client import PartitionProducer

RECORDS = 400_000
BOUND_MIB = 100
"""Before the trim the store kept 159 MiB (peak 164) after these records; after: 54 MiB."""


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def peak_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmHWM for pid {pid}")


def test_a_store_gives_back_the_memory_of_a_burst_once_it_is_stored() -> None:
    with LocalCluster(stores=1, beacon_interval=0.2) as cluster:
        store = cluster.stores[0]
        assert store.pid is not None
        with PartitionProducer("burst", cluster.transport) as producer:
            value = b"x" * 100
            for _ in range(RECORDS):
                producer.publish(value)
            assert producer.flush(300)
        peak = peak_mib(store.pid)
        deadline = time.monotonic() + 30
        while (now := rss_mib(store.pid)) > BOUND_MIB and time.monotonic() < deadline:
            time.sleep(0.2)
        print(f"store RSS {now:.0f} MiB, peak {peak:.0f} MiB")
        assert now <= BOUND_MIB, (
            f"store RSS {now:.0f} MiB 30 s after {RECORDS:,} RECORDs were stored "
            f"(peak {peak:.0f} MiB): freed memory kept"
        )


LAG_RECORDS = 200_000
LAG_WATERMARK = 2_000
LAG_BOUND_MIB = 25
"""What a store may grow by while 200,000 RECORDs wait for it with a receive watermark of
2,000: the watermark's RECORDs (~1 MiB) and a turn's worth of Python objects. Before the
watermark a store's inbound pipe took up to 1,000,000 RECORDs: +80 MiB here."""


def test_a_lagging_store_holds_no_more_than_its_receive_watermark() -> None:
    """A store stopped (SIGSTOP) while a producer publishes 200,000 RECORDs, then resumed:
    its ZeroMQ I/O thread reads what TCP holds into its SUB's pipe, up to the store's
    ``store/receive_watermark`` per peer; the rest waits in the producer. Peak RSS (VmHWM)
    is compared with the RSS before, so the bound is the watermark's, not a timing."""
    with LocalCluster(
        stores=1,
        beacon_interval=1.0,  # the stop is shorter than the store's beacon timeout (4 s)
        store_settings={"store/receive_watermark": LAG_WATERMARK},
    ) as cluster:
        store = cluster.stores[0]
        assert store.pid is not None
        # the producer keeps the stopped store
        transport = dataclasses.replace(cluster.transport, beacon_timeout=60.0)
        with PartitionProducer("lag", transport) as producer:
            producer.publish(b"w")
            assert producer.flush(60), "the warm-up record was not stored"
            before = rss_mib(store.pid)
            sent_before = producer.transport_statistics().sent
            os.kill(store.pid, signal.SIGSTOP)
            try:
                value = b"x" * 100
                for _ in range(LAG_RECORDS):
                    producer.publish(value)
                deadline = time.monotonic() + 60
                while producer.transport_statistics().sent < sent_before + LAG_RECORDS:
                    assert time.monotonic() < deadline, "the producer did not send its RECORDs"
                    time.sleep(0.05)
            finally:
                os.kill(store.pid, signal.SIGCONT)
            assert producer.flush(300), "not every RECORD was stored"
        grown = peak_mib(store.pid) - before
        print(f"store RSS before {before:.0f} MiB, peak +{grown:.0f} MiB")
        assert grown <= LAG_BOUND_MIB, (
            f"the store grew by {grown:.0f} MiB while {LAG_RECORDS:,} RECORDs waited for it "
            f"(receive watermark {LAG_WATERMARK:,})"
        )
