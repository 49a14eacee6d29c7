"""Giving freed heap memory back to the system (glibc's ``malloc_trim``); one wrapper for
every node.

Freed memory stays with the process: glibc keeps freed chunks in its heap for reuse, so RSS
never comes back down after a burst. Two bursts are known:

* a store that took a burst of small RECORDs (one message per RECORD) held them in ZeroMQ's
  pipes (``high_watermark`` messages per pipe), each ZeroMQ message a ``malloc`` of its own:
  after 1M records of 100 B a store stayed at ~340 MiB RSS, of which Python held under 1 MiB
  (tracemalloc), and ``malloc_trim(0)`` gave back all but ~40 MiB. The store trims every few
  seconds after a turn (``dafka.server``, issue 23);
* a beacon flood (tens of thousands of beacons a second decoded, queued and forwarded): a
  node whose probation table empties and a tower whose beacon rate falls tenfold trim once
  (issue 19).

Never on a hot path; a no-op where the C library is not glibc (musl, macOS).

Trimming returns only whole free pages. With Python's own allocator (pymalloc: 1 MiB
arenas, given back only when every object in them is freed) and one glibc arena per thread,
the few objects that outlive a flood (a record in flight, a peer admitted meanwhile) pin
arenas the flood grew: after a 30 s beacon flood a store stayed 17-36 % and a producer
18-33 % above their RSS before it. So the daemons (``dafka tower``, ``store``) run with
:data:`COMPACT_ALLOCATOR`: every Python object in glibc's heap and one arena for all
threads, where a trim gives back each free page; the same flood then left them within
11 % (docs/nodes.md, "Memory after a flood"). :func:`use_compact_allocator` re-executes the
daemon once to get it (the interpreter reads ``PYTHONMALLOC`` only as it starts).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import sys
from collections.abc import Callable, Mapping

log = logging.getLogger(__name__)


def _load_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None  # not glibc: nothing to call
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_TRIM = _load_trim()


def release_free_memory(why: str | None = None) -> bool:
    """Return the heap's free pages to the system; whether any were returned (False when
    there is no ``malloc_trim``). ``why``, when given, is logged at INFO."""
    if _TRIM is None:
        return False
    released = bool(_TRIM(0))
    if why is not None:
        log.info("%s: returned free memory to the system", why)
    return released


COMPACT_ALLOCATOR: Mapping[str, str] = {"PYTHONMALLOC": "malloc", "MALLOC_ARENA_MAX": "1"}
"""The environment of a process whose memory comes back after a burst (module docstring)."""


def use_compact_allocator() -> None:
    """Re-execute this process (same pid, argv and environment) with
    :data:`COMPACT_ALLOCATOR`, on glibc only, and only if neither variable is set: one the
    user set wins, and the re-executed process finds them set. Call it first thing, before
    any thread or file is opened. If the exec fails the process goes on as it is, saying
    so in one WARNING line."""
    if _TRIM is None or any(name in os.environ for name in COMPACT_ALLOCATOR):
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, sys.orig_argv, {**os.environ, **COMPACT_ALLOCATOR})
    except OSError as exc:
        log.warning(
            "cannot re-execute with %s (%s): memory a flood grew may not all come back",
            " ".join(f"{k}={v}" for k, v in COMPACT_ALLOCATOR.items()),
            exc,
        )


__all__ = ["COMPACT_ALLOCATOR", "release_free_memory", "use_compact_allocator"]
