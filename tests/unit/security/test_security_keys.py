"""Keys of a secured node (issue 19): ``keygen`` writes zmq.auth certificates, ``Security.load``
refuses what cannot work with a clear error, the authorized-keys ring follows its directory
(a key added is admitted, a key removed is refused, without a restart), and a secured
tower's forwarded beacon carries the key in a 4th frame while the C formats are unchanged."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import zmq
import zmq.auth

from dafka import ConfigError
from dafka.protocol import Beacon, DecodeError, PeerEndpoint, decode_discovery, encode
from dafka.transport.security import Gate, KeyRing, Security, keygen, warn_if_exposed


def test_keygen_writes_a_zmq_certificate_pair_and_never_overwrites(tmp_path: Path) -> None:
    public, secret = keygen(tmp_path / "node")
    assert (public.name, secret.name) == ("node.key", "node.key_secret")
    assert secret.stat().st_mode & 0o077 == 0
    pub, sec = zmq.auth.load_certificate(secret)
    assert zmq.auth.load_certificate(public) == (pub, None)
    assert sec is not None
    with pytest.raises(ConfigError, match="exists"):
        keygen(tmp_path / "node")
    with pytest.raises(ConfigError, match="not a directory"):
        keygen(tmp_path / "node.key" / "x")  # a file where the directory should be


def test_keygen_creates_a_missing_directory_as_the_docs_run_it(tmp_path: Path) -> None:
    """docs/security.md starts with ``dafka keygen keys/tower`` in a fresh checkout: it said
    ``keys is not a directory`` (exit 2)."""
    public, secret = keygen(tmp_path / "keys" / "deeper" / "tower")
    assert zmq.auth.load_certificate(secret)[1] is not None
    assert public.parent.stat().st_mode & 0o077 == 0


def test_load_refuses_what_cannot_secure_a_node(tmp_path: Path) -> None:
    public, secret = keygen(tmp_path / "n")
    auth = tmp_path / "auth"
    auth.mkdir()
    with pytest.raises(ConfigError, match="needs --authorized-keys"):
        Security.load(secret, None)
    with pytest.raises(ConfigError, match="no secret key"):
        Security.load(public, auth)
    with pytest.raises(ConfigError, match="not a directory"):
        Security.load(secret, tmp_path / "nope")
    with pytest.raises(ConfigError, match=r"absent\.key_secret: no such file"):
        Security.load(tmp_path / "absent.key_secret", auth)  # before: "not a ZeroMQ certificate"
    with pytest.raises(ConfigError, match="not a ZeroMQ certificate"):
        Security.load(auth, auth)
    bad = tmp_path / "bad.key_secret"
    bad.write_text('public-key = "short"\nsecret-key = "short"\n')
    with pytest.raises(ConfigError, match="not 40 Z85"):
        Security.load(bad, auth)


def test_the_tower_key_is_given_else_tower_key_in_the_directory_else_ones_own(
    tmp_path: Path,
) -> None:
    _, secret = keygen(tmp_path / "n")
    tower_public, _ = keygen(tmp_path / "t")
    auth = tmp_path / "auth"
    auth.mkdir()
    own = Security.load(secret, auth)
    assert own.tower_key == own.public_key
    shutil.copy(tower_public, auth / "tower.key")
    expected, _ = zmq.auth.load_certificate(tower_public)
    assert Security.load(secret, auth).tower_key == expected
    other, _ = keygen(tmp_path / "o")
    assert Security.load(secret, auth, other).tower_key == zmq.auth.load_certificate(other)[0]
    assert "secret_key" not in repr(own)  # never printed


def test_the_key_ring_follows_its_directory(tmp_path: Path) -> None:
    auth = tmp_path / "auth"
    auth.mkdir()
    a, _ = keygen(tmp_path / "a")
    b, _ = keygen(tmp_path / "b")
    key_a, key_b = zmq.auth.load_certificate(a)[0], zmq.auth.load_certificate(b)[0]
    ring = KeyRing(auth)
    assert not ring.allows(key_a)
    shutil.copy(a, auth)
    assert ring.allows(key_a)
    assert not ring.allows(key_b)
    shutil.copy(b, auth / "b.key")
    assert ring.allows(key_b)
    (auth / "a.key").unlink()
    assert not ring.allows(key_a)
    assert ring.allows(key_b)
    # a file replaced in place (same name) is re-read too
    os.replace(a, auth / "b.key")
    assert ring.allows(key_a)
    assert not ring.allows(key_b)
    (auth / "junk.key").write_text("not a certificate")  # skipped with a warning
    assert ring.allows(key_a)
    shutil.rmtree(auth)
    assert not ring.allows(key_a)  # an unreadable directory admits nobody


KEY = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"


def test_a_keyed_peer_endpoint_round_trips_and_c_formats_are_unchanged() -> None:
    keyed = PeerEndpoint("node", "tcp://10.0.0.1:4000", KEY)
    frames = encode(keyed)
    assert frames == [b"B", b"node", b"tcp://10.0.0.1:4000", KEY.encode()]
    assert decode_discovery(frames) == keyed
    plain = PeerEndpoint("node", "tcp://10.0.0.1:4000")
    assert encode(plain) == [b"B", b"node", b"tcp://10.0.0.1:4000"]
    assert decode_discovery([b"B", b"node", b"10.0.0.1", b"4000"]) == Beacon(
        "node", "10.0.0.1", 4000
    )
    with pytest.raises(DecodeError, match="Z85"):
        decode_discovery([b"B", b"node", b"tcp://10.0.0.1:4000", b"\x00" * 40])


@pytest.mark.parametrize(
    ("host", "exposed"),
    [
        ("127.0.0.1", False),
        ("127.0.0.2", False),
        ("localhost", False),
        ("::1", False),
        ("tcp://127.0.0.1:5556", False),
        ("tcp://[::1]:5556", False),
        ("*", True),
        ("0.0.0.0", True),
        ("10.0.0.5", True),
        ("tcp://*:5556", True),
        ("eth0", True),
    ],
)
def test_a_plaintext_node_beyond_loopback_says_so_once(
    host: str, exposed: bool, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    warn_if_exposed(host, None, "node")
    assert len([r for r in caplog.records if "without security" in r.message]) == exposed
    caplog.clear()
    _, secret = keygen(tmp_path / "n")
    warn_if_exposed(host, Security.load(secret, tmp_path), "node")
    assert not caplog.records


@pytest.mark.timeout(60)
def test_a_context_takes_secured_nodes_one_after_another(tmp_path: Path) -> None:
    """A node closing the last gate of a context stops its ZAP handler; the next secured node
    of the same context starts another, which binds the same inproc name. Before, the name
    stayed taken until the context's reaper got to the closed socket, and a Producer made
    right after another's close failed "cannot start the ZAP handler: Address already in
    use" (bench/security.py died of it) within a few dozen; the context then hung in
    ``term`` (the socket that failed to bind was never closed)."""
    _, secret = keygen(tmp_path / "n")
    auth = tmp_path / "auth"
    auth.mkdir()
    security = Security.load(secret, auth)
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    try:
        for _ in range(50):
            Gate.open(context, security, "node").close()
    finally:
        context.term()
