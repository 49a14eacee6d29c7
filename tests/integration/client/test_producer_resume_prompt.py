"""A named producer's resume ends on the stores' "that is all" (HEADS-END), not a window.

Before, a resume waited ``max(0.5, 1.5 * beacon_interval)`` after the last store greeted it
(a store holding nothing of a partition stayed silent). With two real store processes, a
producer whose beacon interval makes that window 6 s resumes at the right sequences well
within 3 s: each store says "that is all", and each counts the other.
"""

from __future__ import annotations

import time
from pathlib import Path

from dafka import LocalCluster, Producer

OLD_WINDOW = 6.0
"""The settle window of the second producer below (1.5 * its 4 s beacon interval)."""


def test_a_restarted_named_producer_resumes_without_the_settle_window(tmp_path: Path) -> None:
    with LocalCluster(tmp_path, stores=2, beacon_interval=0.2) as cluster:
        with Producer(
            "prompt",
            towers=cluster.towers,
            name="w",
            partitions=3,
            beacon_interval=0.2,
            beacon_timeout=0.8,
        ) as p:
            keys = [k for k in (b"k%d" % i for i in range(60)) if p.partition_for(k) != "w.2"]
            metas = [p.send(b"one", key=k).result(timeout=30) for k in keys[:9]]
        stored = {m.partition: m.offset for m in metas}  # partition 2 holds nothing
        assert set(stored) == {"w.0", "w.1"}

        started = time.monotonic()
        with Producer(
            "prompt",
            towers=cluster.towers,
            name="w",
            partitions=3,
            beacon_interval=OLD_WINDOW / 1.5,
            beacon_timeout=3 * OLD_WINDOW,
        ) as again:
            ready = time.monotonic() - started
            expected = {"w.0": stored["w.0"] + 1, "w.1": stored["w.1"] + 1, "w.2": 0}
            assert again.start_offsets == expected
            key = next(k for k in (b"k%d" % i for i in range(60)) if p.partition_for(k) == "w.2")
            meta = again.send(b"two", key=key).result(timeout=30)
            assert (meta.partition, meta.offset) == ("w.2", 0)
        assert ready < OLD_WINDOW / 2, f"ready after {ready:.2f}s: the settle window was waited"
