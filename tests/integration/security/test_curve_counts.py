"""What a secured tower refuses is counted (issue 19): a CURVE client with a key not in the
directory (``refused_keys``, ZAP said no) and a plaintext client (``failed_handshakes``,
it never reached ZAP); an authorized one is forwarded with its key."""

from __future__ import annotations

import shutil
from pathlib import Path

import zmq
import zmq.auth

from dafka.protocol import PeerEndpoint, decode_discovery
from dafka.transport.security import Security, keygen
from dafka.transport.tower import Tower
from tests.integration.cluster.cluster_procs import wait_until


def test_a_secured_tower_counts_strangers_and_stamps_the_key_of_members(tmp_path: Path) -> None:
    auth = tmp_path / "auth"
    auth.mkdir()
    _, tower_secret = keygen(tmp_path / "tower")
    member_public, member_secret = keygen(tmp_path / "member")
    _, stranger_secret = keygen(tmp_path / "stranger")
    shutil.copy(member_public, auth)
    context = zmq.Context()
    tower = Tower(
        "tcp://127.0.0.1:*",
        "tcp://127.0.0.1:*",
        context=context,
        security=Security.load(tower_secret, auth),
    )
    tower.start()
    sockets: list[zmq.Socket[bytes]] = []

    def pub(secret: Path | None) -> zmq.Socket[bytes]:
        sock = context.socket(zmq.PUB)
        sock.linger = 0
        if secret is not None:
            Security.load(secret, auth, tmp_path / "tower.key").client(
                sock, Security.load(tower_secret, auth).public_key
            )
        sock.connect(tower.sub_endpoint)
        sockets.append(sock)
        return sock

    try:
        listener = context.socket(zmq.SUB)
        sockets.append(listener)
        listener.linger = 0
        Security.load(member_secret, auth).client(
            listener, Security.load(tower_secret, auth).public_key
        )
        listener.subscribe(b"B")
        listener.connect(tower.pub_endpoint)
        member = pub(member_secret)
        pub(stranger_secret)
        pub(None)
        wait_until(lambda: tower.statistics().refused_keys == 1 or None, "the stranger refused")
        wait_until(lambda: tower.statistics().failed_handshakes >= 1 or None, "plaintext failed")

        def forwarded() -> PeerEndpoint | None:
            member.send_multipart([b"B", b"member-node", b"127.0.0.1", b"4000"])
            if listener.poll(100):
                message = decode_discovery(listener.recv_multipart())
                assert isinstance(message, PeerEndpoint)
                return message
            return None

        got = wait_until(forwarded, "the member's beacon forwarded")
        expected = zmq.auth.load_certificate(member_public)[0].decode()
        assert got == PeerEndpoint("member-node", "tcp://127.0.0.1:4000", expected)
        assert tower.statistics().dropped_unauthenticated == 0
    finally:
        for sock in sockets:
            sock.close()
        tower.stop()
        context.term()


def test_a_tower_given_an_acl_forwards_only_the_keys_it_names(tmp_path: Path) -> None:
    """Both keys are authorized; the ACL grants ``member`` and names ``idle`` nowhere. The
    tower forwards the member's beacons and drops the idle key's (counted in
    ``acl_refused``): no node finds it, so none connects to it. Before, the tower ignored
    ``--acl`` and forwarded both."""
    auth = tmp_path / "auth"
    auth.mkdir()
    _, tower_secret = keygen(tmp_path / "tower")
    member_public, member_secret = keygen(tmp_path / "member")
    idle_public, idle_secret = keygen(tmp_path / "idle")
    shutil.copy(member_public, auth)
    shutil.copy(idle_public, auth)
    acl = tmp_path / "acl.toml"
    acl.write_text('[[grant]]\nkeys = ["member"]\nproduce = ["orders"]\n')
    tower_key = Security.load(tower_secret, auth).public_key
    context = zmq.Context()
    tower = Tower(
        "tcp://127.0.0.1:*",
        "tcp://127.0.0.1:*",
        context=context,
        security=Security.load(tower_secret, auth, acl=acl),
    )
    tower.start()
    sockets: list[zmq.Socket[bytes]] = []

    def socket(kind: int, secret: Path) -> zmq.Socket[bytes]:
        sock = context.socket(kind)
        sock.linger = 0
        Security.load(secret, auth).client(sock, tower_key)
        sockets.append(sock)
        return sock

    try:
        listener = socket(zmq.SUB, member_secret)
        listener.subscribe(b"B")
        listener.connect(tower.pub_endpoint)
        member, idle = socket(zmq.PUB, member_secret), socket(zmq.PUB, idle_secret)
        member.connect(tower.sub_endpoint)
        idle.connect(tower.sub_endpoint)
        seen: set[str] = set()

        def both_sent_and_member_seen() -> bool | None:
            member.send_multipart([b"B", b"member-node", b"127.0.0.1", b"4000"])
            idle.send_multipart([b"B", b"idle-node", b"127.0.0.1", b"4001"])
            while listener.poll(100):
                message = decode_discovery(listener.recv_multipart())
                assert isinstance(message, PeerEndpoint)
                seen.add(message.node_id)
            return ("member-node" in seen and tower.statistics().acl_refused >= 3) or None

        wait_until(both_sent_and_member_seen, "the member forwarded, the idle key refused")
        assert seen == {"member-node"}, seen
    finally:
        for sock in sockets:
            sock.close()
        tower.stop()
        context.term()
