"""Reading the pipeline's outputs back, without Spark: Parquet files and dafka topics.

Spark's file sink is exactly-once through its ``_spark_metadata`` log: a part file counts only
once a committed batch lists it. A job killed mid-batch leaves part files the log never
lists, so reading the directory as a whole would count them; :func:`committed_parquet_files`
follows the log as Spark's own reader does (the latest ``N.compact`` plus the batches after).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from urllib.parse import unquote, urlparse

from dafka.config import PLAINTEXT, KeyFiles
from dafka.pipeline._expected import Aggregate
from dafka.records import Record


def committed_parquet_files(directory: Path) -> list[Path]:
    """The part files the file sink's log says were committed, in batch order."""
    log = directory / "_spark_metadata"
    if not log.is_dir():
        return []
    batches: dict[int, Path] = {}
    compacts: set[int] = set()
    for entry in log.iterdir():
        name = entry.name
        stem = name.removesuffix(".compact")
        if not stem.isdigit():
            continue  # temporary files of a batch being written
        batches[int(stem)] = entry
        if name.endswith(".compact"):
            compacts.add(int(stem))
    if not batches:
        return []
    start = max(compacts) if compacts else 0
    files: dict[str, None] = {}
    for batch in sorted(b for b in batches if b >= start):
        lines = batches[batch].read_text().splitlines()
        if not lines or lines[0] != "v1":
            raise ValueError(f"{batches[batch]}: not a v1 file sink log")
        for line in lines[1:]:
            if not line.strip():
                continue
            item = json.loads(line)
            path = unquote(urlparse(item["path"]).path)
            if item.get("action") == "delete":
                files.pop(path, None)
            else:
                files[path] = None
    return [Path(p) for p in files]


def read_parquet_aggregates(directory: Path) -> list[Aggregate]:
    """Every committed output row of the Parquet sink."""
    import pyarrow.parquet as pq

    rows: list[Aggregate] = []
    for path in committed_parquet_files(directory):
        for row in pq.read_table(path).to_pylist():
            rows.append(Aggregate.from_json(row))
    return rows


def read_topic(
    towers: str,
    topic: str,
    *,
    read_committed: bool,
    idle: float = 3.0,
    timeout: float = 60.0,
    security: KeyFiles = PLAINTEXT,
) -> list[Record]:
    """Every message of ``topic``, from the beginning, once the consumer is at the end.

    The consumer learns the partitions from the stores' beacons; it is "at the end" when it
    has read up to every head it knows and no new message came for ``idle`` seconds.
    """
    from dafka import Consumer, ConsumerSettings, ReadCommittedConsumer

    settings = ConsumerSettings(
        towers=towers,
        **security.fields(),
        offset_reset="earliest",
        skip_unavailable_after=None,  # a check must never skip what it cannot fetch
    )
    kind = ReadCommittedConsumer if read_committed else Consumer
    values: list[Record] = []
    deadline = time.monotonic() + timeout
    with kind([topic], settings=settings) as consumer:
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            records = consumer.poll(timeout=0.2)
            if records:
                values.extend(records)
                quiet_since = time.monotonic()
            elif consumer.at_end() and time.monotonic() - quiet_since >= idle:
                return values
    raise TimeoutError(f"could not read {topic} to its end within {timeout}s")


def aggregates_of(values: list[bytes]) -> Counter[Aggregate]:
    """Output-topic messages as aggregates (raises ValueError on a message that is not one)."""
    return Counter(Aggregate.from_json(json.loads(v)) for v in values)


__all__ = [
    "aggregates_of",
    "committed_parquet_files",
    "read_parquet_aggregates",
    "read_topic",
]
