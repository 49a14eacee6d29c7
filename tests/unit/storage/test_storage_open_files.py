"""Descriptors are not held per idle partition (issue 19: 100,000 new partitions from one
peer took 2 descriptors each and crashed a store, which could not reopen its directory).

The store keeps the active segments of at most ``max_open_partitions`` partitions open, the
least recently written released (fsynced first) and reopened on their next write; at open,
none is held until written.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from dafka.storage import FsyncPolicy, Storage, StorageConfig

PARTITIONS = 60
LIMIT = 8


def _open_fds(root: Path) -> int:
    """This process's descriptors open on files under ``root`` (the storage's own: a count
    of every descriptor also saw the other tests' threads of this worker open and close
    theirs meanwhile - 19 more in a CI run at load 20)."""
    inside = f"{root}{os.sep}"
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        count += target == str(root) or target.startswith(inside)
    return count


def _fill(storage: Storage, rounds: int) -> None:
    for r in range(rounds):
        for p in range(PARTITIONS):
            storage.append("t", f"p{p}", r, [f"{p}:{r}".encode()])


def test_descriptors_stay_bounded_with_many_partitions(tmp_path: Path) -> None:
    for name, policy in (("batch", FsyncPolicy.batch()), ("os", FsyncPolicy.os())):
        config = StorageConfig(fsync=policy, max_open_partitions=LIMIT)
        root = tmp_path / name
        with Storage.open(root, config) as storage:
            _fill(storage, 2)
            assert _open_fds(root) <= 2 * LIMIT + 1  # + the directory lock
            for p in range(PARTITIONS):  # every partition reopened on demand, nothing lost
                held = [(0, f"{p}:0".encode()), (1, f"{p}:1".encode())]
                assert storage.read("t", f"p{p}", 0, 10) == held
                assert storage.durable_offset("t", f"p{p}") == 1
        with Storage.open(root, config) as storage:  # a restart holds none until written
            assert _open_fds(root) <= 2 * LIMIT + 1
            assert storage.recovery_report.partitions == PARTITIONS
            for p in range(PARTITIONS):
                storage.append("t", f"p{p}", 2, [b"x"])
            storage.append("t", "new", 0, [b"a new partition after the restart"])
            assert _open_fds(root) <= 2 * LIMIT + 1
            assert storage.head("t", "p7") == 2


def test_the_default_bound_follows_the_descriptor_limit(tmp_path: Path) -> None:
    """A store process with a 128-descriptor limit takes 300 partitions with the default
    bound, and a new one after a restart (2 per partition took 600 before)."""
    script = f"""
import resource
resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))
from dafka.storage import FsyncPolicy, Storage, StorageConfig
config = StorageConfig(fsync=FsyncPolicy.os())
root = {str(tmp_path / "data")!r}
with Storage.open(root, config) as storage:
    for p in range(300):
        storage.append("t", f"p{{p}}", 0, [b"r"])
with Storage.open(root, config) as storage:
    storage.append("t", "after-restart", 0, [b"r"])
    assert storage.recovery_report.partitions == 300
print("ok")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "ok" in done.stdout, done.stdout
