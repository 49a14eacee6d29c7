"""A group member's client seam on a real cluster (in-process clients, one LocalCluster for
the module): callbacks and their order, ``assignment()``, static membership, fencing, the
asyncio flavour and the argument checks (docs/groups.md)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dafka import (
    AsyncConsumer,
    ConfigError,
    Consumer,
    ConsumerRebalanceListener,
    FencedMemberError,
    LocalCluster,
    Producer,
)

Key = tuple[str, str]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    root: Path = tmp_path_factory.mktemp("groups")
    with LocalCluster(root, stores=1, beacon_interval=0.2) as running:
        yield running


def _produce(cluster: LocalCluster, topic: str, n: int = 60, partitions: int = 4) -> set[Key]:
    with Producer(
        topic, towers=cluster.towers, beacon_interval=0.2, name=f"{topic}-w", partitions=partitions
    ) as producer:
        for i in range(n):
            producer.send(b"%d" % i, key=b"%d" % i)
        assert producer.flush(30) == 0
        return {(topic, p) for p in producer.partitions}


class Recorder(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.calls: list[tuple[str, set[Key]]] = []

    def on_partitions_revoked(self, revoked: set[Key]) -> None:
        self.calls.append(("revoked", revoked))

    def on_partitions_assigned(self, assigned: set[Key]) -> None:
        self.calls.append(("assigned", assigned))


def _member(cluster: LocalCluster, topic: str, group: str, **fields: object) -> Consumer:
    settings: dict[str, object] = {
        "offset_reset": "earliest",
        # sound under load: a runner starved for the session timeout counts itself lost and
        # these tests assert every callback; beats (and joins) as quick as with 1.5 s
        "session_timeout_ms": 4000,
        "heartbeat_interval_ms": 375,
        **fields,
    }
    return Consumer([topic], towers=cluster.towers, beacon_interval=0.2, group_id=group, **settings)  # type: ignore[arg-type]


def _poll_until(members: list[Consumer], condition: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, [sorted(m.assignment()) for m in members]
        for m in members:
            m.poll(0.05)


def test_callbacks_follow_the_assignment_and_close_hands_over(cluster: LocalCluster) -> None:
    parts = _produce(cluster, "g-cb")
    first_listener, second_listener = Recorder(), Recorder()
    first = _member(cluster, "g-cb", "cb", listener=first_listener)
    _poll_until([first], lambda: first.assignment() == parts)
    # new partitions are assigned as the member learns of them (the store's heads): usually
    # one call with all four, under load several (seen at load 25: w.3 first, then the rest)
    assigned = list(first_listener.calls)
    assert {kind for kind, _ in assigned} == {"assigned"}
    assert set().union(*(keys for _, keys in assigned)) == parts
    assert sum(len(keys) for _, keys in assigned) == len(parts)
    joined = len(first_listener.calls)
    second = _member(cluster, "g-cb", "cb", listener=second_listener)
    _poll_until(
        [first, second],
        lambda: len(first.assignment()) == 2 and len(second.assignment()) == 2,
    )
    assert first.assignment() | second.assignment() == parts
    assert first_listener.calls[joined:] == [("revoked", second.assignment())]
    assert second_listener.calls == [("assigned", second.assignment())]
    second.close()  # on_revoke, commit, goodbye: first takes them without a timeout
    assert [kind for kind, _ in second_listener.calls] == ["assigned", "revoked"]
    _poll_until([first], lambda: first.assignment() == parts)
    stats = first.group_statistics()
    assert stats is not None
    # taken on the goodbye, not after session_timeout_ms (before: a time asserted < 1.5 s)
    assert (stats.expired, stats.lost, stats.members, stats.pending) == (0, 0, 1, 0), stats
    first.close()


def test_a_static_member_restarting_within_its_timeout_moves_nothing(
    cluster: LocalCluster,
) -> None:
    parts = _produce(cluster, "g-static")
    calls: list[tuple[str, set[Key]]] = []
    other = _member(
        cluster,
        "g-static",
        "static",
        group_instance_id="w1",
        session_timeout_ms=6000,
        on_assign=lambda keys: calls.append(("assigned", keys)),
        on_revoke=lambda keys: calls.append(("revoked", keys)),
    )
    static = _member(cluster, "g-static", "static", group_instance_id="w2", session_timeout_ms=6000)
    _poll_until(
        [other, static],
        lambda: len(other.assignment()) == 2 and len(static.assignment()) == 2,
    )
    assert other.assignment() | static.assignment() == parts
    share = static.assignment()
    seen = list(calls)
    static.close()  # a static member says no goodbye: its share waits for it
    again = _member(cluster, "g-static", "static", group_instance_id="w2", session_timeout_ms=6000)
    _poll_until([other, again], lambda: again.assignment() == share)
    assert calls == seen  # the other member neither gave up nor took anything
    assert other.assignment() == parts - share
    again.close()
    other.close()


def test_a_newer_member_with_the_same_instance_id_fences_the_older(cluster: LocalCluster) -> None:
    _produce(cluster, "g-fence")
    older = _member(cluster, "g-fence", "fence", group_instance_id="dup")
    _poll_until([older], lambda: bool(older.assignment()))
    newer = _member(cluster, "g-fence", "fence", group_instance_id="dup")
    deadline = time.monotonic() + 30
    fenced: FencedMemberError | None = None
    while fenced is None and time.monotonic() < deadline:
        newer.poll(0.05)
        try:
            older.poll(0.05)
        except FencedMemberError as exc:
            fenced = exc
    assert fenced is not None
    assert "dup" in str(fenced)
    assert older.assignment() == set()
    older.close()
    newer.close()


def test_an_async_member_reads_its_share(cluster: LocalCluster) -> None:
    parts = _produce(cluster, "g-async", n=40)

    async def run() -> set[Key]:
        async with AsyncConsumer(
            ["g-async"],
            towers=cluster.towers,
            beacon_interval=0.2,
            group_id="async",
            offset_reset="earliest",
        ) as consumer:
            got: set[bytes] = set()
            deadline = asyncio.get_running_loop().time() + 30
            while len(got) < 40:
                assert asyncio.get_running_loop().time() < deadline, len(got)
                got |= {r.value for r in await consumer.poll(0.2)}
            stats = await consumer.group_statistics()
            assert stats is not None
            assert (stats.members, stats.pending, stats.assigned) == (1, 0, len(parts)), stats
            return consumer.consumer.assignment()

    assert asyncio.run(run()) == parts


def test_group_arguments_are_checked(cluster: LocalCluster) -> None:
    with pytest.raises(ConfigError, match="group"):
        Consumer(["t"], towers=cluster.towers, on_assign=print)
    with pytest.raises(TypeError, match="not both"):
        Consumer(["t"], towers=cluster.towers, group_id="g", listener=Recorder(), on_lost=print)
    with pytest.raises(TypeError, match="listener"):
        Consumer(["t"], towers=cluster.towers, group_id="g", listener=object())
    with pytest.raises(ConfigError, match="heartbeat_interval_ms"):
        Consumer(["t"], group_id="g", session_timeout_ms=1000, heartbeat_interval_ms=1000)
    with _member(cluster, "g-args", "args") as member, pytest.raises(ConfigError, match="topics"):
        member.subscribe("other")
