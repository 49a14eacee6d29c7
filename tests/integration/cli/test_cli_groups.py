"""``dafka consume -G GROUP``, ``dafka groups [GROUP]`` and the groups in ``dafka status`` and
``dafka top``, against a real cluster (issue 20).

Two ``consume -G`` runs of one group read a topic in turns (the second starts where the
first's commits say, not at --offset-reset); ``dafka groups`` shows the committed offsets and
the lag, in text and JSON; an unknown group is an error naming it; a running ``consume -G``
is shown as the group's member with the partition it reads.
"""

from __future__ import annotations

import json
from pathlib import Path

from dafka import Consumer, LocalCluster, Producer
from dafka.cli._groups import MemberLag
from tests.integration.cli.cli_run import dafka
from tests.integration.cluster.cluster_procs import BEACON_INTERVAL, DAFKA, Processes, wait_until


def test_consume_as_a_group_resumes_at_its_commits_and_groups_shows_the_lag(
    tmp_path: Path, procs: Processes
) -> None:
    with LocalCluster(tmp_path / "data", stores=2, beacon_interval=0.2) as cluster:
        join = ["--tower", cluster.towers, "--beacon-interval", BEACON_INTERVAL]
        # members that count messages get a session sound under load (docs/groups.md,
        # "Timing"): with 2 beacon intervals (0.4 s) a member starved that long counts itself
        # lost and reads again from the group's commits - lines written twice
        session = ["--session-timeout", "4000", "--heartbeat-interval", "100"]
        with Producer(
            "cli-g", towers=cluster.towers, beacon_interval=0.2, name="w", batching=False
        ) as producer:
            for i in range(30):
                producer.send(b"m%d" % i)
            assert producer.flush(30) == 0

        def consume(*args: str) -> list[bytes]:
            done = dafka(
                "consume", "cli-g", "-G", "g1", "--offset-reset", "earliest", *session, *join, *args
            )
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
                "members": [],  # both runs left (a goodbye beat)
                "partitions": [
                    {
                        "topic": "cli-g",
                        "partition": "w.0",
                        "committed": 20,
                        "index": 0,
                        "head": 29,
                        "lag": 10,
                        "lag_records": 10,
                    }
                ],
                "lag": 10,
                "lag_records": 10,
            }
        ]
        status = dafka("status", "--json", "--wait", "5", *join)
        assert status.code == 0, status.err
        assert json.loads(status.out)["groups"] == groups  # dafka status shows them too
        top = dafka("top", "--once", *join)
        assert top.code == 0, top.err
        assert "consumer groups" in top.out.decode()
        assert "g1" in top.out.decode()
        text = dafka("groups", "g1", *join)
        assert text.code == 0, text.err
        assert "group g1: 0 member(s), lag 10 messages (10 RECORDs)" in text.out.decode()

        assert consume("-e") == [b"m%d" % i for i in range(20, 30)]
        after = json.loads(dafka("groups", "g1", "--json", *join).out)
        assert after[0]["lag"] == 0

        unknown = dafka("groups", "nobody", *join)
        assert unknown.code == 1
        assert "group 'nobody': no committed offsets, no live member" in unknown.err

        member = procs.spawn(
            "member",
            [*DAFKA, "consume", "cli-g", "-G", "g2", "--offset-reset", "earliest", *session, *join],
        )
        wait_until(lambda: len(member.out_path.read_bytes().splitlines()) == 30, "g2 read all")

        def g2_members() -> list[dict[str, object]] | None:
            found = json.loads(dafka("groups", "g2", "--json", *join).out)[0]["members"]
            return found if found else None

        live = wait_until(g2_members, "g2's member in dafka groups")
        assert len(live) == 1
        assert live[0]["partitions"] == [["cli-g", "w.0"]]
        assert live[0]["pending"] == []

        # batched RECORDs: the lag counts their messages (before: RECORDs, 2 here)
        with Producer("cli-b", towers=cluster.towers, beacon_interval=0.2, name="b") as batched:
            for r in range(3):
                batched.produce_many([b"b%d-%d" % (r, i) for i in range(10)])
                assert batched.flush(30) == 0
        key = ("cli-b", "b.0")
        with Consumer(
            assign={key: 0},
            group_id="g3",
            enable_auto_commit=False,
            towers=cluster.towers,
            beacon_interval=0.2,
        ) as committer:
            committer.commit({key: (1, 3)})  # RECORD 1's first 3 messages were read
        found = json.loads(dafka("groups", "g3", "--json", *join).out)[0]
        assert found["partitions"][0]["head"] == 2  # one RECORD per flush
        assert (found["lag"], found["lag_records"]) == (7 + 10, 2)
        g3_text = dafka("groups", "g3", *join).out.decode()
        assert "group g3: 0 member(s), lag 17 messages (2 RECORDs)" in g3_text

        # a member's /metrics (dafka consume -G --metrics-port) has its group lag in messages
        # too; its consumer's group_lag counts RECORDs (before: the only gauge, 2 here)
        with Consumer(
            ["cli-b"],
            group_id="g4",
            enable_auto_commit=False,
            offset_reset="earliest",
            towers=cluster.towers,
            beacon_interval=0.2,
            session_timeout_ms=4000,  # sound under load (docs/groups.md, "Timing")
            heartbeat_interval_ms=100,
        ) as g4_member:
            got: list[object] = []

            def read_13() -> bool:
                got.extend(g4_member.poll(0.2, max_records=13 - len(got)))
                return len(got) >= 13

            wait_until(read_13, "13 messages read")
            g4_member.commit()  # (1, 3): RECORD 1's first 3 messages were handed out
            lag = MemberLag(g4_member, 10.0)
            metrics = g4_member.metrics()
            samples = {(s.name, s.labels): s.value for s in lag.samples(metrics)}
        assert metrics.group_lag == 2
        assert samples[("consumer_group_lag_messages", ())] == 17
        labels = (("topic", "cli-b"), ("partition", "b.0"))
        assert samples[("consumer_group_lag_messages_by_partition", labels)] == 17


def test_consume_as_a_group_to_the_end_without_a_store_says_why_and_ends(
    procs: Processes,
) -> None:
    # a member starts each partition at the group's commits, which only stores keep: with
    # -e and no store the run could never end. It says why and exits 1 - after the
    # constructor's first read failed too (a second read then said "nothing committed")
    tower = procs.tower()
    join = ["--tower", tower.spec, "--beacon-interval", BEACON_INTERVAL]
    done = dafka("consume", "cli-nostore", "-G", "g", "-e", *join, timeout=60)
    assert done.code == 1, done.err
    assert "Error: group g: cannot read its committed offsets" in done.err
    assert "is a store running?" in done.err
    assert "Traceback" not in done.err
