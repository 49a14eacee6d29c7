"""``dafka consume -G GROUP`` and ``dafka groups [GROUP]`` against a real cluster (issue 20).

Two ``consume -G`` runs of one group read a topic in turns (the second starts where the
first's commits say, not at --offset-reset); ``dafka groups`` shows the committed offsets and
the lag, in text and JSON; an unknown group is an error naming it.
"""

from __future__ import annotations

import json
from pathlib import Path

from dafka import LocalCluster, Producer
from tests.integration.cli.cli_run import dafka
from tests.integration.cluster.cluster_procs import BEACON_INTERVAL


def test_consume_as_a_group_resumes_at_its_commits_and_groups_shows_the_lag(
    tmp_path: Path,
) -> None:
    with LocalCluster(tmp_path / "data", stores=2, beacon_interval=0.2) as cluster:
        join = ["--tower", cluster.towers, "--beacon-interval", BEACON_INTERVAL]
        with Producer(
            "cli-g", towers=cluster.towers, beacon_interval=0.2, name="w", batching=False
        ) as producer:
            for i in range(30):
                producer.send(b"m%d" % i)
            assert producer.flush(30) == 0

        def consume(*args: str) -> list[bytes]:
            done = dafka("consume", "cli-g", "-G", "g1", "--offset-reset", "earliest", *join, *args)
            assert done.code == 0, done.err
            return done.out.splitlines()

        assert consume("-c", "10") == [b"m%d" % i for i in range(10)]
        assert consume("-c", "10") == [b"m%d" % i for i in range(10, 20)]

        shown = dafka("groups", "--json", *join)
        assert shown.code == 0, shown.err
        groups = json.loads(shown.out)
        assert groups == [
            {
                "group": "g1",
                "partitions": [
                    {
                        "topic": "cli-g",
                        "partition": "w.0",
                        "committed": 20,
                        "index": 0,
                        "head": 29,
                        "lag": 10,
                    }
                ],
                "lag": 10,
            }
        ]
        text = dafka("groups", "g1", *join)
        assert text.code == 0, text.err
        assert "group g1: lag 10" in text.out.decode()

        assert consume("-e") == [b"m%d" % i for i in range(20, 30)]
        after = json.loads(dafka("groups", "g1", "--json", *join).out)
        assert after[0]["lag"] == 0

        unknown = dafka("groups", "nobody", *join)
        assert unknown.code == 1
        assert "group 'nobody' has committed no offsets" in unknown.err
