"""Where a repair puts what it cannot read: a quarantine folder beside the data, never the bin.

A repair keeps the log contiguous by cutting it at the first bad record (see
``_partition_log``). Dropping the bytes after the cut would destroy evidence, and maybe data
that a person could still salvage by hand (a single flipped bit makes a whole segment
unreadable to us, not to a careful reader). So whole files are *moved* into
``<root>/.quarantine/<topic dir>/<partition dir>/`` (a rename: it costs no space, even on a
full disk), and the cut tail of a segment that stays in use is *copied* there (and fsynced)
before the segment is truncated. Names get a UTC time stamp, so repeated repairs never
overwrite each other. Nothing in the quarantine is ever read back or deleted by dafka; the
operator removes it.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Final

QUARANTINE_DIR: Final = ".quarantine"
"""Directory under the data root (a name no topic directory can have: those never start with
``.``)."""

_COPY_CHUNK = 1 << 20


def quarantine_dir(partition_dir: Path) -> Path:
    """The quarantine folder of the partition log stored in ``partition_dir``."""
    topic_dir = partition_dir.parent
    return topic_dir.parent / QUARANTINE_DIR / topic_dir.name / partition_dir.name


def _target(partition_dir: Path, name: str) -> Path:
    folder = quarantine_dir(partition_dir)
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    candidate = folder / f"{name}.{stamp}"
    n = 1
    while candidate.exists():
        candidate = folder / f"{name}.{stamp}.{n}"
        n += 1
    return candidate


def copy_range(src: int, start: int, end: int, out: int, at: int) -> int:
    """Copy bytes ``[start, end)`` of ``src`` to ``out`` at ``at`` (``pread``/``pwrite``,
    1 MiB at a time, short writes resumed); stops early at the end of ``src``. Returns the
    position in ``out`` after the last byte written. No fsync: the caller's."""
    position = start
    while position < end:
        data = os.pread(src, min(_COPY_CHUNK, end - position), position)
        if not data:
            break
        view = memoryview(data)
        while view:
            written = os.pwrite(out, view, at)
            view = view[written:]
            at += written
        position += len(data)
    return at


def move_to_quarantine(path: Path) -> Path:
    """Move the file ``path`` (in a partition directory) into its quarantine; the new path."""
    target = _target(path.parent, path.name)
    os.rename(path, target)
    return target


def copy_to_quarantine(path: Path, fd: int, start: int, end: int) -> Path:
    """Copy bytes ``[start, end)`` of ``path`` (open as ``fd``) into its quarantine, fsynced.

    Called before the bytes are truncated away, so they exist somewhere at every moment. A
    failed copy (a full disk) removes its partial file and raises the ``OSError``: the caller
    then must not truncate.
    """
    target = _target(path.parent, f"{path.name}.from-{start}")
    out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        copy_range(fd, start, end, out, 0)
        os.fsync(out)
    except BaseException:
        os.close(out)
        with contextlib.suppress(OSError):
            target.unlink()
        raise
    os.close(out)
    return target


__all__ = ["QUARANTINE_DIR", "copy_to_quarantine", "move_to_quarantine", "quarantine_dir"]
