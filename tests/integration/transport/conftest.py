"""Shared fixtures of the transport tests: a real tower on ephemeral loopback ports."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dafka.transport.tower import Tower


@pytest.fixture
def tower() -> Iterator[Tower]:
    t = Tower("tcp://127.0.0.1:*", "tcp://127.0.0.1:*")
    t.start()
    yield t
    t.stop()
