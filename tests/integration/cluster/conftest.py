"""Fixtures of the cluster tests: the process registry that kills everything at teardown."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.cluster.cluster_procs import Processes


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Processes]:
    """Start processes through this; whatever still runs at the end is killed (SIGKILL).

    Their logs stay in ``tmp_path / "logs"``; a failed test also shows their tails.
    """
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    processes = Processes(log_dir)
    try:
        yield processes
    finally:
        processes.close()
        # Shown by pytest only when the test failed: the last words of every process.
        print(processes.describe())
