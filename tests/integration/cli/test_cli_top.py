"""``dafka top --once`` prints a complete first frame (issue 22: a healthy store showed 0
partitions in 2 of 7 runs).

With the users' default beacon interval (1 s: refresh 0.5 s, as quiet as the old settle), each
run must show every store holding the partition. The mechanism (a store's lost first answer
asked again before the view settles) is tested deterministically in
tests/integration/client/test_cluster_watcher_complete.py; this is the command.
"""

from __future__ import annotations

from pathlib import Path

from dafka.server import LocalCluster
from tests.integration.cli.cli_run import dafka


def _store_rows(out: str) -> list[list[str]]:
    """The stores table's rows: store, address, partitions, records, lag."""
    return [
        [cell.strip() for cell in line.strip("│ ").split("│")]
        for line in out.splitlines()
        if "tcp://" in line
    ]


def test_top_once_shows_every_store_with_what_it_holds(tmp_path: Path) -> None:
    with LocalCluster(tmp_path, stores=2, beacon_interval=1.0) as cluster:
        done = dafka("produce", "t", "--tower", cluster.towers, stdin=b"a\nb\n")
        assert done.code == 0, done.err
        for _ in range(3):
            shown = dafka("top", "--once", "--tower", cluster.towers)
            assert shown.code == 0, shown.err
            rows = _store_rows(shown.out.decode())
            assert len(rows) == 2, shown.out.decode()
            # one partition each, holding the two lines in one RECORD or two (the first
            # line leaves alone when nothing is in flight: docs/client.md), both stores alike
            assert [r[2] for r in rows] == ["1", "1"], shown.out.decode()
            assert rows[0][3] in ("1", "2"), shown.out.decode()
            assert rows[1][3] == rows[0][3], shown.out.decode()
