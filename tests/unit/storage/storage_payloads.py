"""Payloads for the storage unit tests: each one can only be the record it was written as."""

from __future__ import annotations

import hashlib


def payload(partition: str, offset: int, size: int | None = None) -> bytes:
    """A payload that can only be the record at ``offset`` of ``partition``."""
    seed = hashlib.blake2b(f"{partition}/{offset}".encode(), digest_size=16).digest()
    length = size if size is not None else seed[0] % 200
    return (seed * (length // 16 + 1))[:length]
