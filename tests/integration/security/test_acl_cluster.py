"""Permissions on a secured cluster of real processes (issue 19): a tower and 2 stores run
with an ACL (``dafka up``'s LocalCluster with ``--acl``); ``dafka produce``/``consume`` run
with keys the ACL grants differently:

* alice may produce to and consume ``orders``: her records round-trip;
* bob is authorized (he joins the cluster) but may only use ``logs``: his RECORDs for
  ``orders`` are stored by no store and he reads none of alice's (each a counted drop on
  both stores: ``acl_refused`` in their /metrics);
* mallory may produce to ``orders`` but takes alice's producer name: his producer resumes
  alice's partition and sends its next sequences; both stores drop them (``not_owner``) and
  a reader sees alice's records only, also after a store's restart (the owners persist);
* the ACL is re-read while the stores run: once it grants bob ``orders``, he reads them;
* a stranger's key (not in the directory) is refused by the tower and stores nothing.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path

from dafka.server import free_port_pair
from tests.integration.cli.cli_run import Result, dafka
from tests.integration.cluster.cluster_procs import wait_until
from tests.integration.security.secured import keygen, secured_cluster

ACL = """
stores = ["tower"]          # dafka up's tower and stores run with the tower's key

[[grant]]
keys = ["alice"]
produce = ["orders"]
consume = ["orders"]

[[grant]]
keys = ["bob", "mallory"]
produce = ["logs"]
consume = ["logs"]

[[grant]]
keys = ["mallory.key"]
produce = ["orders"]
"""
ALICE = [b"order-%d" % i for i in range(50)]


def _three_ports() -> int:
    """A port P such that P, P+1 and P+2 are this test's (the tower's, store-0's and
    store-1's /metrics): two consecutive pairs of ``free_port_pair``'s window below the
    kernel's ephemeral range, which every cluster of this user takes in turn. Three ports
    the kernel picked were in its ephemeral range, where any connection on the machine may
    take one as its source port - store-0's while it restarts, for one."""
    for _ in range(20):
        first = free_port_pair()
        if free_port_pair() == first + 2:
            return first
    raise AssertionError("no two consecutive pairs of free ports")


def _counter(port: int, name: str) -> float:
    """A store's counter from its /metrics (``dafka_store_<name>``)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        metric, _, value = line.rpartition(" ")
        if metric.endswith((f"store_{name}", f"store_{name}_total")):
            return float(value)
    raise AssertionError(f"no store_{name} in /metrics:\n{text[:2000]}")


def test_acl_refuses_what_a_key_may_not_do_and_partitions_keep_their_owner(
    tmp_path: Path,
) -> None:
    keys, auth = keygen(tmp_path, ("tower", "alice", "bob", "mallory", "stranger"))
    acl = tmp_path / "acl.toml"
    acl.write_text(ACL)
    metrics = _three_ports()  # the tower's, store-0's, store-1's
    stores = (metrics + 1, metrics + 2)
    with secured_cluster(tmp_path, keys, auth, acl=acl, metrics_port=metrics) as secured:
        c, log, join, as_ = secured.cluster, secured.log, secured.join, secured.as_

        def read(name: str) -> list[bytes]:
            got = dafka("consume", "orders", *join, *as_(name), "--earliest", "-e")
            assert got.code == 0, got.err
            return got.out.splitlines()

        lines = b"\n".join(ALICE) + b"\n"
        done = dafka("produce", "orders", *join, *as_("alice"), "--name", "alice", stdin=lines)
        assert done.code == 0, done.err
        assert read("alice") == ALICE
        assert [_counter(p, "acl_refused") for p in stores] == [0, 0]

        # bob is authorized, but not for orders: no store takes his records ...
        bob = dafka("produce", "orders", *join, *as_("bob"), "--flush-timeout", "3", stdin=b"bob\n")
        assert bob.code != 0, bob.err
        refused = [_counter(p, "acl_refused") for p in stores]
        assert all(n >= 1 for n in refused), refused
        # ... and he reads nothing of alice's (his GET-HEADS and FETCHes refused)
        assert read("bob") == []
        after_read = [_counter(p, "acl_refused") for p in stores]
        assert all(a > b for a, b in zip(after_read, refused, strict=True)), (after_read, refused)
        for store in ("store-0", "store-1"):
            assert log.count(store, "not allowed by the ACL") >= 1

        # mallory may produce to orders, but alice's partition is alice's
        def mallory_as_alice(lines: bytes) -> Result:
            """mallory's ``dafka produce`` under alice's producer name."""
            name = ["--name", "alice", "--flush-timeout", "3"]
            return dafka("produce", "orders", *join, *as_("mallory"), *name, stdin=lines)

        mallory = mallory_as_alice(b"forged-1\nforged-2\n")
        assert mallory.code != 0, mallory.err
        assert [_counter(p, "not_owner") >= 1 for p in stores] == [True, True]
        assert read("alice") == ALICE

        # the owners survive a restart: store-0, killed and restarted, still refuses him
        c.kill("store-0")
        c.wait_restarted("store-0", 1)
        again = mallory_as_alice(b"forged-3\n")
        assert again.code != 0, again.err
        assert _counter(stores[0], "not_owner") >= 1
        assert read("alice") == ALICE

        # the ACL is re-read while the stores run: granted orders, bob reads them
        acl.write_text(ACL + '[[grant]]\nkeys = ["bob"]\nconsume = ["orders"]\n')

        def reread() -> bool | None:
            return all(log.count(s, "re-read") >= 1 for s in ("store-0", "store-1")) or None

        wait_until(reread, "both stores to re-read the ACL")
        assert read("bob") == ALICE

        # a stranger's key: the tower refuses it (a plaintext node: test_curve_cluster.py)
        stranger = dafka(
            "produce", "orders", *join, *as_("stranger"), "--flush-timeout", "3", stdin=b"no\n"
        )
        assert stranger.code != 0, stranger.err
        assert read("alice") == ALICE
        wait_until(
            lambda: log.count("tower", "is not authorized") >= 1 or None,
            "the tower to log the stranger's key",
        )
