"""Every program in examples/ runs and does what it says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


@pytest.mark.timeout(120)
def test_quickstart_receives_every_record() -> None:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "quickstart.py")],
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "received 1000 messages; last of its key: hello #999" in result.stdout
