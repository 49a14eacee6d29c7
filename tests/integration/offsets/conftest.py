"""Fixtures of the committed-offsets tests: a two-store cluster per module, and the process
registry (``procs``) that kills what a test started."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dafka import LocalCluster
from tests.integration.cluster.conftest import procs

__all__ = ["cluster", "procs"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    root: Path = tmp_path_factory.mktemp("offsets")
    with LocalCluster(root, stores=2, beacon_interval=0.2) as running:
        yield running
