"""``max_message_bytes`` on the command line (issue 18, path 5): one setting for the stores
(``dafka up``), ``dafka produce`` and ``dafka consume``.

A line over the limit is refused by ``dafka produce`` with one line on stderr, the others
are stored, and the command exits 1 saying how many it refused; ``dafka consume`` reads
the rest.
"""

from __future__ import annotations

from pathlib import Path

from dafka.server import LocalCluster
from tests.integration.cli.cli_run import dafka
from tests.integration.cluster.cluster_procs import BEACON_INTERVAL

LIMIT = 2048


def test_produce_refuses_a_line_over_the_limit_and_stores_the_others(tmp_path: Path) -> None:
    lines = [b"one", b"x" * (LIMIT + 1), b"three"]
    with LocalCluster(
        tmp_path / "d",
        stores=1,
        beacon_interval=float(BEACON_INTERVAL),
        max_message_bytes=LIMIT,
    ) as c:
        join = ["--tower", c.towers, "--beacon-interval", BEACON_INTERVAL]
        limit = ["--max-message-bytes", str(LIMIT)]
        done = dafka("produce", "big", *join, *limit, stdin=b"\n".join(lines) + b"\n")
        assert done.code == 1, done.err
        assert "refused message 2:" in done.err
        assert "over max_message_bytes=2,048: nothing was queued" in done.err
        assert "1 message(s) refused (over --max-message-bytes); the 2 others were stored" in (
            done.err
        )
        assert "Traceback" not in done.err
        read = dafka("consume", "big", *join, *limit, "--earliest", "-c", "2")
        assert read.code == 0, read.err
        assert read.out == b"one\nthree\n"
        bad = dafka("produce", "big", *join, "--max-message-bytes", "10", stdin=b"x\n")
        assert bad.code == 2
        assert "from 1024 to 67108864" in bad.err
