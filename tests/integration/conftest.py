"""Fixtures shared by the integration tests of several folders."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.storage.tmpfs import TmpfsUnavailableError, small_tmpfs


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 2 MB filesystem the test can fill (a tmpfs: root only); without one the test
    is skipped saying why - the disk-full tests, of the storage and of a store process."""
    try:
        with small_tmpfs(tmp_path / "disk", "2m") as disk:
            yield disk
    except TmpfsUnavailableError as exc:
        pytest.skip(f"needs a small real filesystem to fill: {exc}")
