"""Issue 8 item 3 (retention): a running store applies its retention on a schedule.

``apply_retention`` existed but nothing called it. A store whose settings keep ~8 KiB per
partition, checked every 0.1 s, drops its oldest closed segments while records flow; the
newest records stay readable.
"""

from __future__ import annotations

import time
from pathlib import Path

from dafka import Producer
from dafka.server import StoreNode
from dafka.storage import FsyncPolicy, RetentionPolicy, StorageConfig
from dafka.transport.config import TransportConfig
from tests.integration.loopback import loopback_tower

RECORDS = 2_000


def test_a_store_applies_retention_on_a_schedule(tmp_path: Path) -> None:
    with loopback_tower() as (towers, transport):
        _retention_under_traffic(tmp_path, towers, transport)


def _retention_under_traffic(tmp_path: Path, towers: str, transport: TransportConfig) -> None:
    config = StorageConfig(
        segment_bytes=4096,
        fsync=FsyncPolicy.batch(),
        retention=RetentionPolicy(max_bytes=8192),
        retention_check_s=0.1,
    )
    store = StoreNode(tmp_path / "store", transport, storage_config=config)
    store.start()
    try:
        with Producer(
            "kept",
            towers=towers,
            name="r",
            batching=False,
            beacon_interval=0.2,
            beacon_timeout=0.8,
        ) as producer:
            for i in range(RECORDS):
                producer.send(b"%05d" % i + b"." * 95)
            assert producer.flush(30) == 0
        storage, runner = store.storage, store.runner
        assert storage is not None
        assert runner is not None

        def span() -> tuple[int | None, int | None]:
            return runner.call(
                lambda _n: (storage.start_offset("kept", "r.0"), storage.next_offset("kept", "r.0"))
            )

        def trimmed() -> bool:
            start, _ = span()
            return start is not None and start > 0 and (RECORDS - start) * 100 < 8192 + 2 * 4096

        # Retention may first run while the producer is still publishing (it trims to the
        # head of that moment): wait for a run after the last record, not for the first one.
        deadline = time.monotonic() + 10
        while not trimmed() and time.monotonic() < deadline:
            time.sleep(0.05)
        start, end = span()
        assert end == RECORDS
        assert start is not None
        assert 0 < start < RECORDS, "retention never ran"
        assert (RECORDS - start) * 100 < 8192 + 2 * 4096  # ~ the policy, in whole segments
    finally:
        store.stop()
