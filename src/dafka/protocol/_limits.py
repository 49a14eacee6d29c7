"""How large a RECORD's content may be: the cluster-wide setting ``max_message_bytes``.

One limit for every node, so that they agree on what exists: a producer refuses a message
whose RECORD would be larger (at the call), a store keeps a *drop notice* in place of a
larger RECORD from a foreign producer (the partition goes on), and a consumer skips both
(counted): live and late readers of a partition see the same records.
"""

from __future__ import annotations

from typing import Final

MAX_MESSAGE_BYTES: Final = 64 * 1024 * 1024
"""The default and the largest ``max_message_bytes``: a store's log holds records of up to
64 MiB (``StorageConfig.max_record_bytes``; a longer length there reads as corruption)."""

MIN_MESSAGE_BYTES: Final = 1024
"""The smallest ``max_message_bytes``: room for a batch of one small message."""


def message_limit_problem(value: object) -> str | None:
    """Why ``value`` is not a valid ``max_message_bytes`` (None: it is)."""
    ok = isinstance(value, int) and not isinstance(value, bool)
    if ok and MIN_MESSAGE_BYTES <= value <= MAX_MESSAGE_BYTES:  # type: ignore[operator]
        return None
    return f"must be an int in [{MIN_MESSAGE_BYTES}, {MAX_MESSAGE_BYTES}] (bytes), got {value!r}"


__all__ = ["MAX_MESSAGE_BYTES", "MIN_MESSAGE_BYTES", "message_limit_problem"]
