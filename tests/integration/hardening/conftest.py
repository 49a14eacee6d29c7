"""Fixtures of the hardening tests: an in-process cluster, and the process registry."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dafka.server import InProcessCluster
from tests.integration.cluster.conftest import procs

__all__ = ["cluster", "procs"]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[InProcessCluster]:
    """A tower and one store on loopback, beaconing every 0.2 s."""
    with InProcessCluster(tmp_path / "data", stores=1, beacon_interval=0.2) as running:
        yield running
