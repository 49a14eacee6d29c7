"""Node ids as the C reference makes them: 32 upper-case hex characters (a UUID4, no dashes).

Here, not in a client or a server module, because every kind of node needs one.
"""

from __future__ import annotations

import uuid


def new_node_id() -> str:
    return uuid.uuid4().hex.upper()


__all__ = ["new_node_id"]
