"""Spark's Python workers must import dafka (issue 21): when the interpreter they run
(``PYSPARK_PYTHON``) lacks it, ``check_workers`` / ``register`` say which interpreter and how
to fix it, where Spark says only ``DATA_SOURCE_NOT_FOUND``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dafka.errors import ConfigError
from dafka.spark._workers import check_python


def test_an_interpreter_without_dafka_is_named_with_the_fix(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    subprocess.run(
        [Path(sys.base_prefix) / "bin" / "python3", "-m", "venv", "--without-pip", bare],
        check=True,
    )
    python = str(bare / "bin" / "python")
    with pytest.raises(ConfigError) as failed:
        check_python(python)
    message = str(failed.value)
    assert f"workers run {python}" in message
    assert "No module named 'pyspark_dafka'" in message
    assert f"PYSPARK_PYTHON={sys.executable}" in message
    assert "pip install 'dafka[spark]'" in message


def test_a_missing_interpreter_is_said_too() -> None:
    with pytest.raises(ConfigError, match="could not be started"):
        check_python("/nonexistent/python3")


def test_this_interpreter_imports_it() -> None:
    check_python(sys.executable)
