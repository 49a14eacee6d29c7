"""A secured (CURVE) cluster of real processes (issue 19): ``dafka keygen`` keys, a tower and
2 stores (``dafka up``'s LocalCluster with ``--key``/``--authorized-keys``), ``dafka produce``,
``dafka consume`` and ``dafka status`` round-trip; a node with an unknown key or with no key
is refused by the tower and by the stores (each refusal logged by the node that refused it)
and reads nothing; adding a key to the directory admits it without a restart, removing it
refuses it again.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import zmq
import zmq.auth

from tests.integration.cli.cli_run import dafka
from tests.integration.cluster.cluster_procs import wait_until
from tests.integration.security.secured import keygen, secured_cluster

LINES = [b"secret-%d" % i for i in range(100)]


def _keys(tmp_path: Path) -> tuple[Path, Path]:
    """``dafka keygen`` for the cluster (tower.key), a producer, a consumer and a stranger;
    the authorized directory holds all but the stranger's public key."""
    names = ("tower", "producer", "consumer", "stranger")
    keys, auth = keygen(tmp_path, names)
    for name in names:
        assert (keys / f"{name}.key").is_file()
        assert (keys / f"{name}.key_secret").stat().st_mode & 0o077 == 0
    # the files are zmq.auth certificates: its loader reads them
    public, secret = zmq.auth.load_certificate(keys / "producer.key_secret")
    assert len(public) == 40
    assert secret is not None
    assert len(secret) == 40
    return keys, auth


def test_secured_cluster_round_trips_and_refuses_strangers(tmp_path: Path) -> None:
    keys, auth = _keys(tmp_path)
    with secured_cluster(tmp_path, keys, auth) as secured:
        c, log, join, as_ = secured.cluster, secured.log, secured.join, secured.as_
        done = dafka("produce", "secret", *join, *as_("producer"), stdin=b"\n".join(LINES) + b"\n")
        assert done.code == 0, done.err
        read = dafka("consume", "secret", *join, *as_("consumer"), "--earliest", "-c", "100")
        assert read.code == 0, read.err
        assert read.out.splitlines() == LINES
        status = dafka("status", "secret", *join, *as_("consumer"), "--json")
        assert status.code == 0, status.err
        assert len([s for s in json.loads(status.out)["stores"] if s["live"]]) == 2

        # a stranger (a key not in the directory) and a plaintext node: the tower refuses
        # both, so they never join; each refusal is logged by the tower
        stranger = dafka("consume", "secret", *join, *as_("stranger"), "--earliest", "-c", "1")
        assert (stranger.code, stranger.out) == (1, b""), stranger.err
        assert "no welcome" in stranger.err
        assert log.count("tower", "is not authorized") == 1
        plain = dafka("consume", "secret", *join, "--earliest", "-c", "1")
        assert (plain.code, plain.out) == (1, b""), plain.err
        wait_until(
            lambda: log.count("tower", "failed its CURVE handshake") >= 1 or None,
            "the tower to log the plaintext node's failed handshake",
        )

        # strangers going straight to a store's data port read nothing either
        context = zmq.Context()
        try:
            writer_port = c.stores[0].ports[0]
            tower_public, _ = zmq.auth.load_certificate(keys / "tower.key")
            plain_sub = context.socket(zmq.SUB)
            stranger_sub = context.socket(zmq.SUB)
            public, secret = zmq.auth.load_certificate(keys / "stranger.key_secret")
            assert secret is not None
            stranger_sub.curve_publickey, stranger_sub.curve_secretkey = public, secret
            stranger_sub.curve_serverkey = tower_public
            for sock in (plain_sub, stranger_sub):
                sock.linger = 0
                sock.subscribe(b"")
                sock.connect(f"tcp://127.0.0.1:{writer_port}")
            wait_until(
                lambda: log.count("store-0", "is not authorized") >= 1 or None,
                "store-0 to refuse the stranger's key",
            )
            wait_until(
                lambda: log.count("store-0", "failed its CURVE handshake") >= 1 or None,
                "store-0 to log the plaintext SUB's failed handshake",
            )
            more = dafka("produce", "secret", *join, *as_("producer"), stdin=b"late\n")
            assert more.code == 0, more.err  # the store ACKed it on the port they watch
            assert plain_sub.poll(0) == 0
            assert stranger_sub.poll(0) == 0
            plain_sub.close()
            stranger_sub.close()
        finally:
            context.term()

        # hot add: the stranger's key in the directory admits it without a restart
        shutil.copy(keys / "stranger.key", auth)
        admitted = dafka("consume", "secret", *join, *as_("stranger"), "--earliest", "-c", "101")
        assert admitted.code == 0, admitted.err
        got = admitted.out.splitlines()  # "late" is another partition: any order between them
        assert [line for line in got if line != b"late"] == LINES
        assert got.count(b"late") == 1, got
        # ... and removing it refuses it again
        (auth / "stranger.key").unlink()
        again = dafka("consume", "secret", *join, *as_("stranger"), "--earliest", "-c", "1")
        assert (again.code, again.out) == (1, b""), again.err
