"""Shared fixtures of the node machine tests: ids shaped like the C nodes' (32 hex chars)."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

_counter = itertools.count(1)


def make_id() -> str:
    """A fresh node id like a C node's: 32 upper-case hex characters."""
    return f"{next(_counter):032X}"


@pytest.fixture
def new_id() -> Callable[[], str]:
    return make_id
