"""Giving memory back to the system after a flood (issue 19).

A burst of traffic (a beacon flood: tens of thousands of beacons a second decoded, queued
and forwarded) grows the C heap that libzmq and Python's larger objects share; freed, those
pages stay with the process (glibc keeps them for reuse) and its RSS never comes back down.
``malloc_trim(0)`` hands the free pages back. Called only when a flood ended, never on a hot
path; a no-op where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)


def _trim_function() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


_TRIM = _trim_function()


def release_free_memory(why: str) -> None:
    """Return the C heap's free pages to the system (glibc ``malloc_trim``)."""
    if _TRIM is not None:
        _TRIM(0)
        log.info("%s: returned free memory to the system", why)


__all__ = ["release_free_memory"]
