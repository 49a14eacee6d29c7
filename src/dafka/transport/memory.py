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
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from collections.abc import Callable

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


__all__ = ["release_free_memory"]
