"""Fixtures of the exactly-once tests: a cluster per module, the process registry."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dafka.server import LocalCluster
from tests.integration.cluster.conftest import procs

__all__ = ["cluster", "procs"]


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(stores=2, beacon_interval=0.2) as running:
        yield running
