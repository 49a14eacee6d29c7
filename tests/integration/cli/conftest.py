"""Fixtures of the CLI tests: real ``dafka`` processes, logs in files, all killed at teardown."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.cluster.cluster_procs import Processes


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Processes]:
    """Start processes through this; whatever still runs at the end is killed (SIGKILL)."""
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    processes = Processes(log_dir)
    try:
        yield processes
    finally:
        processes.close()
        print(processes.describe())
