"""Throughput and recovery time of the storage engine, next to the raw disk's bandwidth.

Prints, on a scratch directory on the same disk as this checkout (never tmpfs):

* raw sequential write bandwidth: ``os.write`` of 1 MiB blocks then one ``fdatasync``
  (what ``dd bs=1M conv=fdatasync`` measures), the yardstick for the ratios below;
* append throughput for 100-byte and 1-KiB records in batches of 1000, under each fsync
  policy (batch, records:10000, ms:10, os), in records/s and MB/s of payload and of log
  bytes, each timed up to a final ``flush()`` so that everything is on disk as in ``dd``;
* read throughput of the 100-byte and 1-KiB partitions (batches of 1000, warm page cache);
* the time to open (recover) a 1,000,000-record partition, and to open it with its index
  files deleted (a full rebuild scan).

Run: ``.venv/bin/python bench/storage.py [--quick] [--dir PATH]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from dafka.storage import FsyncPolicy, Storage, StorageConfig

POLICIES = ["batch", "records:10000", "ms:10", "os"]
BATCH = 1000
MB = 1_000_000


def fstype(path: Path) -> str:
    """The filesystem type of the mount holding ``path`` (from /proc/mounts)."""
    best, kind = "", "unknown"
    resolved = str(path.resolve())
    try:
        with open("/proc/mounts") as mounts:
            for line in mounts:
                _dev, mount, fs, *_ = line.split()
                if (resolved == mount or resolved.startswith(mount.rstrip("/") + "/")) and len(
                    mount
                ) > len(best):
                    best, kind = mount, fs
    except OSError:
        pass
    return kind


def scratch_parent(requested: str | None) -> Path:
    """Where to make the scratch directory: the temp dir if it shares this checkout's disk."""
    if requested:
        return Path(requested)
    here = Path(__file__).resolve().parent.parent
    tmp = Path(tempfile.gettempdir())
    if os.stat(tmp).st_dev == os.stat(here).st_dev and fstype(tmp) != "tmpfs":
        return tmp
    return here.parent


def raw_write_bandwidth(directory: Path, total: int) -> float:
    """Bytes/s of 1 MiB writes followed by one fdatasync."""
    block = os.urandom(1 << 20)
    path = directory / "raw.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        started = time.perf_counter()
        for _ in range(total // len(block)):
            os.write(fd, block)
        os.fdatasync(fd)
        elapsed = time.perf_counter() - started
    finally:
        os.close(fd)
        path.unlink()
    return (total // len(block)) * len(block) / elapsed


def append_run(directory: Path, policy: str, size: int, records: int) -> tuple[float, int]:
    """Seconds to append ``records`` payloads of ``size`` bytes and flush; log bytes."""
    config = StorageConfig(fsync=FsyncPolicy.parse(policy))
    payloads = [os.urandom(size) for _ in range(BATCH)]
    with Storage.open(directory, config) as storage:
        started = time.perf_counter()
        offset = 0
        while offset < records:
            n = min(BATCH, records - offset)
            storage.append("bench", "p", offset, payloads[:n])
            storage.sync_due(time.monotonic())
            offset += n
        storage.flush()
        elapsed = time.perf_counter() - started
        log = storage.log("bench", "p")
        assert log is not None
        return elapsed, log.size_bytes


def read_run(directory: Path) -> tuple[float, int, int]:
    """Seconds to read the whole partition in batches; records and payload bytes read."""
    with Storage.open(directory, StorageConfig(fsync=FsyncPolicy.os())) as storage:
        head = storage.head("bench", "p")
        assert head is not None
        started = time.perf_counter()
        offset = count = payload_bytes = 0
        while offset <= head:
            got = storage.read("bench", "p", offset, BATCH)
            count += len(got)
            payload_bytes += sum(len(p) for _, p in got)
            offset += len(got)
        return time.perf_counter() - started, count, payload_bytes


def open_time(directory: Path) -> tuple[float, int]:
    started = time.perf_counter()
    with Storage.open(directory, StorageConfig(fsync=FsyncPolicy.os())) as storage:
        elapsed = time.perf_counter() - started
        return elapsed, storage.recovery_report.records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short run (about 10x less data)")
    parser.add_argument("--dir", help="parent of the scratch directory (default: same disk)")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    counts = {100: 1_000_000 // scale, 1024: 200_000 // scale}

    parent = scratch_parent(args.dir)
    work = Path(tempfile.mkdtemp(prefix="dafka-bench-storage-", dir=parent))
    try:
        print(f"scratch directory {work} ({fstype(work)})")
        # the same volume as the 1 KiB runs, measured before and after them (the disk is
        # shared and noisy); ratios use the better of the two, so they are conservative
        raw_bytes = max(16 << 20, counts[1024] * (1024 + 16))
        raw_before = max(raw_write_bandwidth(work, raw_bytes) for _ in range(2))
        rows: list[tuple[int, str, int, float, int]] = []
        for size, records in counts.items():
            for policy in POLICIES:
                target = work / f"append-{size}-{policy.replace(':', '-')}"
                elapsed, log_bytes = append_run(target, policy, size, records)
                rows.append((size, policy, records, elapsed, log_bytes))
                if policy != "os":
                    shutil.rmtree(target)
        raw_after = raw_write_bandwidth(work, raw_bytes)
        raw = max(raw_before, raw_after)
        print(
            f"raw sequential write of {raw_bytes / MB:.0f} MB (1 MiB writes + fdatasync): "
            f"{raw_before / MB:.1f} MB/s before (best of 2), {raw_after / MB:.1f} MB/s after"
        )
        print(f"('of raw' below: log bytes/s over the better of the two, {raw / MB:.1f} MB/s)")
        print()
        print(
            f"{'append':<8} {'policy':<14} {'records':>9} {'records/s':>11} "
            f"{'payload MB/s':>13} {'log MB/s':>9} {'of raw':>7}"
        )
        for size, policy, records, elapsed, log_bytes in rows:
            print(
                f"{size:>5} B  {policy:<14} {records:>9} {records / elapsed:>11,.0f} "
                f"{records * size / elapsed / MB:>13.1f} {log_bytes / elapsed / MB:>9.1f} "
                f"{log_bytes / elapsed / raw:>6.0%}"
            )
        print()
        for size in counts:
            elapsed, count, payload_bytes = read_run(work / f"append-{size}-os")
            print(
                f"read  {size:>5} B  {count:>9} records {count / elapsed:>11,.0f} records/s "
                f"{payload_bytes / elapsed / MB:>8.1f} payload MB/s (warm page cache)"
            )
        print()
        million = work / "million"
        config = StorageConfig(fsync=FsyncPolicy.os())
        with Storage.open(million, config) as storage:
            payloads = [os.urandom(100) for _ in range(BATCH)]
            for offset in range(0, 1_000_000, BATCH):
                storage.append("bench", "p", offset, payloads)
        elapsed, records = open_time(million)
        print(f"open (recover) a partition of {records:,} records: {elapsed * 1000:8.1f} ms")
        for idx in million.rglob("*.idx"):
            idx.unlink()
        elapsed, records = open_time(million)
        print(
            f"open the same with its index files deleted (rebuild scan): {elapsed * 1000:8.1f} ms"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
