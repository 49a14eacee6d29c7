"""Give freed heap memory back to the operating system (glibc's ``malloc_trim``).

A store that took a burst of small RECORDs (one message per RECORD) held them in ZeroMQ's
pipes (``high_watermark`` messages per pipe), each ZeroMQ message a ``malloc`` of its own.
Once the burst is stored those are freed, but glibc keeps the freed chunks in its heap: a
store that stored 1M records of 100 B stayed at ~340 MiB RSS, of which Python held under
1 MiB (tracemalloc) and ``malloc_trim(0)`` gave back all but ~40 MiB. The store calls
:func:`release_free_memory` every few seconds (``TRIM_INTERVAL``) after a turn. Elsewhere
than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

TRIM_INTERVAL = 5.0
"""Seconds between two trims of a store's heap (a trim of a small heap costs microseconds)."""


def _load_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None  # not glibc (musl, macOS): nothing to call
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_TRIM = _load_trim()


def release_free_memory() -> bool:
    """Return the heap's free pages to the system; whether any were returned (False when
    there is no ``malloc_trim``)."""
    if _TRIM is None:
        return False
    return bool(_TRIM(0))
