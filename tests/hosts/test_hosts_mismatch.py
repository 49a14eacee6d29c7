"""A bind/advertise mismatch across hosts is an error at start or a loud line, never a wait.

Issue 24: a producer the stores could not reach waited 15 s and asked "is a store
running?" while two were; a consumer the stores could not reach printed nothing and exited
0. Each case here is a node told to listen or advertise where the other hosts cannot reach
it; each must say so and name --bind/--advertise.
"""

from __future__ import annotations

from tests.hosts.conftest import Cluster


def test_an_advertised_address_nobody_reaches_is_said_and_named(cluster: Cluster) -> None:
    wrong = cluster.host("c").address.rsplit(".", 1)[0] + ".99"  # on c's subnet, nobody's
    producer = cluster.dafka(
        "c",
        "produce-wrong-advertise",
        "produce",
        "mismatch",
        "--bind",
        "*",
        "--advertise",
        wrong,
        "--flush-timeout",
        "6",
        stdin=True,
    )
    assert producer.popen.stdin is not None
    producer.popen.stdin.write(b"1\n2\n3\n")
    producer.popen.stdin.close()
    assert producer.wait_exit(60) == 1, producer.tail()
    err = producer.stderr()
    assert "did not connect back" in err, err
    assert f"advertises {wrong}" in err, err
    assert "3 of 3 messages were not stored" in err, err
    assert "could not connect back to this producer: give --bind" in err, err
    assert "is a store running" not in err, err


def test_loopback_only_with_another_address_advertised_is_refused_at_start(
    cluster: Cluster,
) -> None:
    producer = cluster.dafka(
        "c",
        "produce-loopback",
        "produce",
        "mismatch",
        "--bind",
        "127.0.0.1",
        "--advertise",
        cluster.host("c").address,
        stdin=True,
    )
    assert producer.popen.stdin is not None
    producer.popen.stdin.close()
    assert producer.wait_exit(30) != 0
    err = producer.stderr()
    assert "loopback only (--bind 127.0.0.1)" in err, err
    assert "Traceback" not in err, err


def test_a_loopback_bind_with_a_tower_on_another_host_is_said(cluster: Cluster) -> None:
    reader = cluster.dafka(
        "c",
        "consume-loopback",
        "consume",
        "mismatch",
        "--bind",
        "127.0.0.1",
        "-e",
        "-o",
        "earliest",
    )
    reader.wait_exit(60)
    err = reader.stderr()
    assert "listens on loopback only (127.0.0.1)" in err, err
    assert f"--bind {cluster.host('c').address}" in err, err
