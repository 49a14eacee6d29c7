"""Faults between hosts: a host cut off for 30 s, a store host restarted, a slow lossy link.

Each test drives real processes on three hosts (tests/hosts/conftest.py) with the README's
flags and checks what issue 24 asks: every message delivered once and in order (0 lost,
0 duplicated, 0 reordered), the stores converged, and the figures printed (throughput and
latency through the impaired link).
"""

from __future__ import annotations

import time

import pytest

from tests.hosts.conftest import Cluster, converged, done_event

CUT_SECONDS = 30.0


def _exactly_once(event: dict[str, int], count: int) -> None:
    got = (event["unique"], event["duplicates"], event["reordered"], event["missing"])
    assert got == (count, 0, 0, 0), event


def test_a_host_cut_off_for_30s_loses_duplicates_and_reorders_nothing(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    count = 3000
    reader = cluster.client(
        "a", "cut-consume", "consume", "cut", "--expect", str(count), "--timeout", "240"
    )
    reader.wait_event("ready")
    writer = cluster.client(
        "c", "cut-produce", "produce", "cut", "--count", str(count), "--rate", "100"
    )
    writer.wait_event("progress", lambda e: e["acked"] >= 300)  # streaming across hosts
    cluster.hosts.cut("c")
    cut_at = time.monotonic()
    try:
        before = writer.wait_event("progress", lambda e: e["sent"] >= 1500)
        time.sleep(max(0.0, cut_at + CUT_SECONDS - time.monotonic()))  # the fault's length
    finally:
        cluster.hosts.heal("c")
    healed_at = time.monotonic()
    produced = done_event(writer, timeout=240)
    recovered = time.monotonic() - healed_at
    assert (produced["acked"], produced["not_acked"]) == (count, 0), produced
    got = done_event(reader, timeout=240)
    _exactly_once(got, count)
    converged(cluster, "a", "cut")
    with capsys.disabled():
        print(
            f"\n[cut] host c cut off {CUT_SECONDS:g}s (acked {before['acked']} of "
            f"{before['sent']} sent during it); every message stored {recovered:.1f}s after "
            f"the heal: {count}/{count} once, in order"
        )


def test_a_store_host_restarted_catches_up(cluster: Cluster) -> None:
    store_b = cluster.stores["b"]
    assert store_b.stop() == 0, store_b.tail()
    writer = cluster.client("c", "restart-produce", "produce", "restart", "--count", "1000")
    assert done_event(writer)["acked"] == 1000
    cluster.start_store("b")
    reader = cluster.client("b", "restart-consume", "consume", "restart", "--expect", "1000")
    _exactly_once(done_event(reader), 1000)
    converged(cluster, "a", "restart")


def test_a_slow_lossy_link_delivers_everything_once(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """As fast as the producer sends (throughput), then at a steady 200 msg/s (latency)."""
    count, steady = 5000, 1000
    cluster.hosts.impair("c", 50, 10, 1)
    try:
        figures = []
        for topic, total, pace in (
            ("netem", count, []),
            ("netem-steady", steady, ["--rate", "200"]),
        ):
            readers = {
                host: cluster.client(
                    host, f"{topic}-consume-{host}", "consume", topic, "--expect", str(total)
                )
                for host in ("a", "c")
            }
            for reader in readers.values():
                reader.wait_event("ready")
            writer = cluster.client(
                "c", f"{topic}-produce", "produce", topic, "--count", str(total), "--warmup", *pace
            )
            produced = done_event(writer, timeout=240)
            assert (produced["acked"], produced["not_acked"]) == (total, 0), produced
            got = {host: done_event(reader, timeout=240) for host, reader in readers.items()}
            for event in got.values():
                _exactly_once(event, total)
            figures.append((produced, got))
    finally:
        cluster.hosts.impair("c", 0)
    converged(cluster, "a", "netem")
    (fast, fast_got), (slow, slow_got) = figures
    with capsys.disabled():
        print(
            f"\n[netem] host c's link 50 ms +- 10 ms each way, 1% loss ({cluster.hosts.impairment})"
            f": {count} messages as fast as sent: producer on c {fast['rate']} msg/s (all "
            f"ACKed), consumer on a {fast_got['a']['rate']} msg/s; at 200 msg/s: ACK p50 "
            f"{slow['ack_p50_ms']} ms p99 {slow['ack_p99_ms']} ms, end to end on a p50 "
            f"{slow_got['a']['p50_ms']} ms p99 {slow_got['a']['p99_ms']} ms, on c p50 "
            f"{slow_got['c']['p50_ms']} ms p99 {slow_got['c']['p99_ms']} ms"
        )
