"""``dafka topics describe``: every column of the partitions' table starts under its header
(before, only PARTITION was padded: HEAD, PRODUCER, STORES and LAG drifted off)."""

from __future__ import annotations

import re

from dafka.cli._status import describe_lines

_CELL = re.compile(r"\S+(?: \S+)*")  # cells are apart by two spaces or more


def cell_starts(line: str) -> list[int]:
    return [m.start() for m in _CELL.finditer(line)]


def assert_aligned(lines: list[str]) -> None:
    """Each cell of each row starts where its column's header does."""
    starts = cell_starts(lines[0])
    assert len(starts) == 5, lines[0]
    for line in lines[1:]:
        assert cell_starts(line) == starts, "\n".join(lines)


def test_each_cell_starts_under_its_header() -> None:
    partitions = [
        {
            "partition": "w.0",
            "head": 12345,
            "producer_head": None,
            "stores": {"a": 12345, "b": None},
            "lag": 12346,
        },
        {
            "partition": "06B070F75BF34A1FB430CDE970F89A59.0",
            "head": 0,
            "producer_head": 7,
            "stores": {"a": 0, "b": 0},
            "lag": 0,
        },
    ]
    lines = describe_lines(partitions)
    assert lines[0].split() == ["PARTITION", "HEAD", "PRODUCER", "STORES", "LAG"]
    assert_aligned(lines)
    assert "[12345 -]" in lines[1]
    assert lines[2].split()[2] == "7"
