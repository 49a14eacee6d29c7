"""A cluster across three hosts with the README's flags: the commands and clients just work.

Issue 24, as a user found it: with the defaults, a producer on a second host bound its data
socket to 127.0.0.1 but was announced at the address the tower saw, so no store could
connect to it ("is a store running?" after 15 s, two stores running); a consumer printed
nothing and exited 0; ``dafka status`` showed both stores holding 0 partitions. Each test
here failed that way before nodes listened where their tower reaches them.
"""

from __future__ import annotations

from tests.hosts.conftest import Cluster, converged, done_event

COUNT = 2000


def _lines(count: int) -> bytes:
    return b"".join(b"%d\n" % i for i in range(1, count + 1))


def test_cli_produce_consume_and_status_across_hosts(cluster: Cluster) -> None:
    producer = cluster.dafka("c", "produce", "produce", "numbers", stdin=True)
    assert producer.popen.stdin is not None
    producer.popen.stdin.write(_lines(COUNT))
    producer.popen.stdin.close()
    assert producer.wait_exit(90) == 0, producer.tail()

    for host in ("c", "a", "b"):  # the clients' host, the tower's, the second store's
        proc = cluster.dafka(host, f"consume-{host}", "consume", "numbers", "-o", "earliest", "-e")
        assert proc.wait_exit(90) == 0, proc.tail()
        got = proc.out_path.read_text().split()
        assert got == [str(i) for i in range(1, COUNT + 1)], f"{host}: {len(got)} lines"

    for host in ("c", "a"):
        found = converged(cluster, host, "numbers")
        stores = found["stores"]
        addresses = sorted(s["address"].split(":")[1].removeprefix("//") for s in stores)
        assert addresses == sorted([cluster.host("a").address, cluster.host("b").address])
        assert all(s["partitions"] == 1 and s["lag"] == 0 for s in stores), stores
        assert found["topics"]["numbers"]["records"] > 0, found


def test_python_clients_across_hosts(cluster: Cluster) -> None:
    reader = cluster.client("b", "py-consume", "consume", "py", "--expect", str(COUNT))
    reader.wait_event("ready")
    writer = cluster.client("c", "py-produce", "produce", "py", "--count", str(COUNT))
    produced = done_event(writer)
    assert produced["acked"] == COUNT, produced
    got = done_event(reader)
    assert (got["unique"], got["duplicates"], got["reordered"], got["missing"]) == (
        COUNT,
        0,
        0,
        0,
    ), got


def test_transactional_loop_across_hosts(cluster: Cluster) -> None:
    """CLI transactions on host c, a read-committed/transactional loop on host b, a
    read-committed reader on host a: every message once, in order."""
    loop = cluster.client(
        "b", "txn-loop", "txn-loop", "orders", "--out", "totals", "--expect", "1000"
    )
    loop.wait_event("ready")
    writer = cluster.dafka(
        "c",
        "produce-txn",
        "produce",
        "orders",
        "--transactional-id",
        "w1",
        "--transaction-size",
        "100",
        stdin=True,
    )
    assert writer.popen.stdin is not None
    writer.popen.stdin.write(b"".join(b"%d:0\n" % i for i in range(1000)))
    writer.popen.stdin.close()
    assert writer.wait_exit(90) == 0, writer.tail()
    assert done_event(loop)["committed"] == 1000
    reader = cluster.client(
        "a", "read-committed", "consume", "totals", "--expect", "1000", "--committed"
    )
    got = done_event(reader)
    assert (got["unique"], got["duplicates"], got["reordered"], got["missing"]) == (
        1000,
        0,
        0,
        0,
    ), got
