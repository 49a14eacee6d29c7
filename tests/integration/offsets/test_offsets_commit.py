"""A consumer group's committed offsets on a real cluster: commit, read back, resume there.

In-process clients (the process restarts are in test_offsets_restart.py); each test uses its
own group and topic, so they share one cluster.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from dafka import AsyncConsumer, CommittedOffset, ConfigError, Consumer, LocalCluster, Producer
from dafka.metrics import client_samples


def _produce(
    cluster: LocalCluster, topic: str, n: int, partitions: int = 2, batching: bool = True
) -> tuple[str, ...]:
    with Producer(
        topic,
        towers=cluster.towers,
        beacon_interval=0.2,
        name=f"{topic}-w",
        partitions=partitions,
        batching=batching,
    ) as producer:
        values = [b"%d" % i for i in range(n)]
        if batching:  # one call: one RECORD per partition (a lone send() goes alone)
            producer.produce_many(values, values)
        else:
            for value in values:
                producer.send(value, key=value)
        assert producer.flush(30) == 0
        return producer.partitions


def _consumer(cluster: LocalCluster, **fields: object) -> Consumer:
    settings: dict[str, object] = {"offset_reset": "earliest", **fields}
    return Consumer(towers=cluster.towers, beacon_interval=0.2, **settings)  # type: ignore[arg-type]


def _drain(consumer: Consumer, want: int, max_records: int = 10_000) -> list[tuple[str, int, int]]:
    got: list[tuple[str, int, int]] = []
    deadline = time.monotonic() + 30
    while len(got) < want:
        assert time.monotonic() < deadline, f"only {len(got)} of {want} in 30 s"
        got += [
            (r.partition, r.offset, r.index)
            for r in consumer.poll(1.0, max_records=min(max_records, want - len(got)))
        ]
    return got


def test_an_assigned_group_consumer_resumes_at_the_commit_inside_a_batch(
    cluster: LocalCluster,
) -> None:
    parts = _produce(cluster, "off-assign", 100)
    keys = {("off-assign", p): 0 for p in parts}
    with _consumer(cluster, assign=keys, group_id="g-assign", enable_auto_commit=False) as first:
        got = _drain(first, 60, max_records=7)  # polls cut the batches
        first.commit()
        committed = first.committed(keys)
        metrics = first.metrics()  # /metrics: the group lag, from this member's commits
        heads = first.heads()
        lag = {k: max(0, heads[k] + 1 - c.offset) for k, c in committed.items() if c is not None}
        assert metrics.group_lag_by_partition == lag
        assert metrics.group_lag == sum(lag.values()) > 0  # a cut batch is not done
        samples = {s.name for s in client_samples("consumer", metrics)}
        assert {"consumer_group_lag", "consumer_group_lag_by_partition"} <= samples
    assert all(isinstance(c, CommittedOffset) for c in committed.values())
    assert any(c is not None and c.index > 0 for c in committed.values())  # a cut batch
    with _consumer(cluster, assign=keys, group_id="g-assign") as second:
        rest = _drain(second, 40)
        assert second.poll(0.5) == []
    assert len(set(got + rest)) == 100  # nothing lost, nothing twice


def test_a_subscribed_group_starts_at_its_commits_and_resets_only_elsewhere(
    cluster: LocalCluster,
) -> None:
    parts = _produce(cluster, "off-sub", 40, batching=False)  # a RECORD per message
    one = ("off-sub", parts[0])
    with _consumer(cluster, group_id="g-sub") as setup:
        setup.commit({one: 3})
    # offset_reset="latest": only the partition without a commit starts at its head
    with _consumer(
        cluster,
        topics="off-sub",
        group_id="g-sub",
        offset_reset="latest",
        session_timeout_ms=4000,  # a runner starved for 0.4 s (the default here) under load
        heartbeat_interval_ms=100,  # counted itself lost and read its partition twice
    ) as consumer:
        got = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not consumer.at_end():
            got += consumer.poll(0.5)
        counts = {p: sum(1 for r in got if r.partition == p) for p in parts}
        assert min(r.offset for r in got) == 3
        assert counts == {parts[0]: 20 - 3, parts[1]: 0}
        assert consumer.committed([one, ("off-sub", parts[1])]) == {
            one: consumer.committed([one])[one],
            ("off-sub", parts[1]): None,
        }


def test_auto_commit_commits_what_earlier_polls_handed_out(
    cluster: LocalCluster,
) -> None:
    parts = _produce(cluster, "off-auto", 30, partitions=3)
    keys = {("off-auto", p): 0 for p in parts}
    with _consumer(cluster, assign=keys, group_id="g-auto", auto_commit_interval_ms=50) as c:
        _drain(c, 30)
        # the last poll's records are not committed before the next poll (a poll during
        # the drain may have committed what polls before it handed out, or the start)
        assert not all(o is not None and o.offset == 1 for o in c.committed(keys).values())
        deadline = time.monotonic() + 10
        done = False
        while not done and time.monotonic() < deadline:
            c.poll(0.1)  # a poll past the interval commits what earlier polls handed out
            done = all(o is not None and o.offset == 1 for o in c.committed(keys).values())
        assert done, c.committed(keys)
    with _consumer(cluster, assign=keys, group_id="g-auto") as again:
        assert again.poll(0.5) == []  # everything was committed


def test_commit_without_a_group_is_a_config_error(cluster: LocalCluster) -> None:
    with _consumer(cluster, assign={("off-none", "p.0"): 0}) as consumer:
        with pytest.raises(ConfigError, match="group_id"):
            consumer.commit()
        with pytest.raises(ConfigError, match="group_id"):
            consumer.committed()


def test_the_asyncio_consumer_commits_and_reads_commits(cluster: LocalCluster) -> None:
    parts = _produce(cluster, "off-async", 20)
    keys = {("off-async", p): 0 for p in parts}

    async def scenario() -> dict[tuple[str, str], CommittedOffset | None]:
        async with AsyncConsumer(
            assign=keys,
            towers=cluster.towers,
            beacon_interval=0.2,
            group_id="g-async",
            enable_auto_commit=False,
        ) as consumer:
            got = 0
            async with asyncio.timeout(30):
                while got < 20:
                    got += len(await consumer.poll(1.0))
            await consumer.commit_async()
            await consumer.commit()
            return await consumer.committed(keys)

    committed = asyncio.run(scenario())
    assert {k: (c.offset, c.index) for k, c in committed.items() if c} == dict.fromkeys(
        keys, (1, 0)
    )


def test_partitions_are_pairs_and_a_group_subscription_takes_no_start_positions(
    cluster: LocalCluster,
) -> None:
    """A new user's slips (issue 20 trial): ``committed("topic")`` iterated the string's
    characters as partitions, and ``start_positions`` with a group's subscription was
    silently ignored (a fresh group read nothing where the positions asked for 4)."""
    with pytest.raises(ConfigError, match="start_positions with a group"):
        _consumer(cluster, topics="off-pairs", group_id="g-pairs", start_positions={("a", "b"): 0})
    with _consumer(cluster, assign={("off-pairs", "p.0"): 0}, group_id="g-pairs") as consumer:
        with pytest.raises(TypeError, match="not the string 'off-pairs'"):
            consumer.committed("off-pairs")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="pairs of str, got 'o'"):
            consumer.seek_to_committed(["o"])  # type: ignore[list-item]
        assert consumer.committed([("off-pairs", "p.0")]) == {("off-pairs", "p.0"): None}
