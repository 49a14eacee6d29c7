"""Reading the file sink's log: only committed part files count, compactions included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dafka.pipeline._outputs import committed_parquet_files


def write_log(directory: Path, name: str, entries: list[tuple[str, str]]) -> None:
    log = directory / "_spark_metadata"
    log.mkdir(parents=True, exist_ok=True)
    lines = ["v1"] + [
        json.dumps({"path": f"file://{directory / path}", "size": 1, "action": action})
        for path, action in entries
    ]
    (log / name).write_text("\n".join(lines) + "\n")


def test_no_log_no_files(tmp_path: Path) -> None:
    (tmp_path / "part-0.parquet").write_bytes(b"orphan")
    assert committed_parquet_files(tmp_path) == []


def test_batches_compaction_and_orphans(tmp_path: Path) -> None:
    write_log(tmp_path, "0", [("a.parquet", "add")])
    write_log(tmp_path, "1", [("b.parquet", "add")])
    write_log(tmp_path, "2.compact", [("a.parquet", "add"), ("b.parquet", "add"), ("c", "add")])
    write_log(tmp_path, "3", [("d%20e.parquet", "add"), ("a.parquet", "delete")])
    (tmp_path / "_spark_metadata" / ".4.tmp").write_text("v1\n")  # a batch being written
    (tmp_path / "orphan.parquet").write_bytes(b"")  # written by a killed batch, never logged
    names = [p.name for p in committed_parquet_files(tmp_path)]
    assert names == ["b.parquet", "c", "d e.parquet"]


def test_a_log_that_is_not_v1_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "_spark_metadata"
    log.mkdir()
    (log / "0").write_text("v9\n{}\n")
    with pytest.raises(ValueError, match="v1"):
        committed_parquet_files(tmp_path)
