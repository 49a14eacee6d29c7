"""CURVE security of a node: its keypair, the keys it admits, and the ZAP handler that admits them.

A secured node (``TransportConfig.security``) makes every TCP socket CurveZMQ: the sockets it
binds (data PUBs, a tower's XSUB/XPUB) are CURVE servers with the node's secret key, and
every connection to them is checked by ZAP against the public certificates of
``authorized_keys`` (a directory of ``*.key`` files, as ``zmq.auth`` writes them); the
sockets it connects are CURVE clients that expect the server's public key - a tower's is
``tower_key``, a peer's data PUB's is the key its beacon came with (the secured tower adds
the key its connection authenticated with, :class:`dafka.protocol.PeerEndpoint`).

The directory is re-read whenever its listing or a file in it changes (checked at every new
connection, which is when ZAP asks): adding a file admits that key without a restart,
removing it refuses new connections with it (connections already made stay up).

ZeroMQ lets one ZAP handler serve a context (``inproc://zeromq.zap.01``); several nodes of
one process share a context, so one handler per context serves them all, each node under
its own ZAP domain with its own directory and counters (:class:`Gate`). The handler's thread
also reads the nodes' socket monitors, to count connections whose handshake failed (a
plaintext or misconfigured peer never reaches ZAP).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

import zmq
import zmq.auth
from zmq.utils import z85
from zmq.utils.monitor import parse_monitor_message

from dafka.config import Acl, KeyFiles, is_loopback, key_name
from dafka.errors import ConfigError

log = logging.getLogger(__name__)

ZAP_ENDPOINT = "inproc://zeromq.zap.01"
Z85_KEY_LENGTH = 40
TOWER_KEY_NAME = "tower.key"
"""The tower's public certificate in an authorized-keys directory, when no ``tower_key``."""
_HANDSHAKE_FAILURES = zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
"""Monitored: a refusal by ZAP is counted by the gate itself (``refused_keys``)."""


def keygen(path: str | os.PathLike[str]) -> tuple[Path, Path]:
    """Write a new keypair: ``PATH.key`` (public) and ``PATH.key_secret`` (secret, mode 600).

    The files are ZeroMQ certificates (``zmq.auth.create_certificates``' format). Refuses to
    overwrite an existing one (:class:`ConfigError`). A missing directory is created (mode
    700: it will hold secrets), so ``dafka keygen keys/tower`` runs in a fresh checkout.
    """
    base = Path(path)
    public, secret = Path(f"{base}.key"), Path(f"{base}.key_secret")
    for existing in (public, secret):
        if existing.exists():
            raise ConfigError(f"{existing} exists; remove it or choose another name")
    directory = base.parent
    if not base.name:
        raise ConfigError(f"{path!r} names no file")
    if directory.exists() and not directory.is_dir():
        raise ConfigError(f"{directory} is not a directory")
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)  # `keygen keys/a` as documented
        written = zmq.auth.create_certificates(str(directory), base.name)
    except OSError as exc:
        raise ConfigError(f"cannot write {public}: {exc}") from exc
    os.chmod(written[1], 0o600)
    return Path(written[0]), Path(written[1])


def _public_key_of(path: Path) -> bytes:
    """The Z85 public key of a certificate, checked (:class:`ConfigError`)."""
    try:
        public, _ = zmq.auth.load_certificate(path)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a ZeroMQ certificate ({exc})") from exc
    _check_key(public, path, "public")
    return public


def _check_key(key: bytes, path: Path, what: str) -> None:
    try:
        valid = len(key) == Z85_KEY_LENGTH and len(z85.decode(key)) == 32
    except (ValueError, KeyError, IndexError):
        valid = False
    if not valid:
        raise ConfigError(f"{path}: the {what} key is not {Z85_KEY_LENGTH} Z85 characters")


@dataclass(frozen=True, slots=True)
class Security:
    """A node's CURVE identity: its keypair, whom it admits, and the towers' public key."""

    public_key: bytes
    """Z85, 40 bytes."""
    secret_key: bytes = field(repr=False)
    authorized_keys: Path
    """Directory of public certificates allowed to connect to this node's sockets."""
    tower_key: bytes
    """Z85 public key of the towers this node connects to."""
    key_file: Path
    acl: Path | None = None
    """The permissions file (``--acl``, :class:`dafka.config.Acl`), checked at load and
    re-read when it changes; None: every authorized key may do everything."""

    @classmethod
    def load(
        cls,
        key: str | os.PathLike[str],
        authorized_keys: str | os.PathLike[str] | None,
        tower_key: str | os.PathLike[str] | None = None,
        acl: str | os.PathLike[str] | None = None,
    ) -> Security:
        """Read ``key`` (a secret certificate) and check ``authorized_keys`` (a directory).

        The towers' key is ``tower_key`` (a certificate), else ``tower.key`` in the
        authorized-keys directory, else the node's own public key (a tower run with the same
        keypair, as ``dafka up`` does). ``acl`` (a permissions file) is parsed once here so
        that a bad one stops the node at start. Any problem is a :class:`ConfigError` naming
        the file.
        """
        key_file = Path(key)
        if authorized_keys is None or str(authorized_keys) == "":
            raise ConfigError(
                f"--key {key_file} needs --authorized-keys DIR too (security/authorized_keys): "
                "the public certificates allowed to connect"
            )
        directory = Path(authorized_keys)
        if not directory.is_dir():
            raise ConfigError(f"authorized keys {directory}: not a directory")
        if not key_file.exists():
            raise ConfigError(
                f"key {key_file}: no such file (`dafka keygen PATH` writes PATH.key_secret)"
            )
        try:
            public, secret = zmq.auth.load_certificate(key_file)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"key {key_file}: not a ZeroMQ certificate ({exc})") from exc
        if secret is None:
            raise ConfigError(
                f"key {key_file} holds no secret key: give the .key_secret file `dafka keygen` "
                "wrote"
            )
        _check_key(public, key_file, "public")
        _check_key(secret, key_file, "secret")
        if tower_key is not None and str(tower_key) != "":
            towers = _public_key_of(Path(tower_key))
        elif (directory / TOWER_KEY_NAME).is_file():
            towers = _public_key_of(directory / TOWER_KEY_NAME)
        else:
            towers = public
        acl_file = None
        if acl is not None and str(acl) != "":
            acl_file = Path(acl)
            Acl.load(acl_file)
        return cls(public, secret, directory, towers, key_file, acl_file)

    @classmethod
    def from_files(cls, files: KeyFiles) -> Security | None:
        """The security of ``files`` (None: no key, plaintext); the combination and every
        file are checked (:class:`ConfigError`)."""
        files.check()
        if files.key is None:
            return None
        return cls.load(files.key, files.authorized_keys, files.tower_key, files.acl)

    def server(self, sock: zmq.Socket[bytes], gate: Gate) -> None:
        """Make ``sock`` (before it binds) a CURVE server whose peers ``gate`` checks."""
        sock.setsockopt(zmq.CURVE_SERVER, 1)
        sock.setsockopt(zmq.CURVE_SECRETKEY, self.secret_key)
        sock.setsockopt(zmq.CURVE_PUBLICKEY, self.public_key)
        sock.setsockopt(zmq.ZAP_DOMAIN, gate.domain.encode())
        gate.watch(sock)

    def client(self, sock: zmq.Socket[bytes], server_key: bytes) -> None:
        """Make the next ``connect`` of ``sock`` a CURVE client of the server ``server_key``.

        ZeroMQ copies the options at ``connect``: one socket may connect to several servers,
        each with its own key, by setting it before each connect.
        """
        sock.setsockopt(zmq.CURVE_SECRETKEY, self.secret_key)
        sock.setsockopt(zmq.CURVE_PUBLICKEY, self.public_key)
        sock.setsockopt(zmq.CURVE_SERVERKEY, server_key)


class KeyRing:
    """The public keys of a directory's ``*.key`` certificates, re-read when it changes."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._signature: tuple[tuple[str, int, int, int], ...] | None = None
        self._keys: dict[bytes, frozenset[str]] = {}

    def allows(self, key: bytes) -> bool:
        """Whether the Z85 ``key`` is one of the directory's (as it is now)."""
        self.refresh()
        return key in self._keys

    def names(self, key: bytes) -> frozenset[str]:
        """The names an ACL knows the Z85 ``key`` by, as last read (:meth:`refresh`): the key
        itself and the name of each certificate of it (``alice`` for ``alice.key``)."""
        z85_key = key.decode("ascii", "replace")
        return self._keys.get(key, frozenset()) | {z85_key}

    def refresh(self) -> bool:
        """Re-read the directory if it changed; returns whether it did."""
        before = self._signature
        self._refresh()
        return self._signature != before

    def _refresh(self) -> None:
        try:
            with os.scandir(self._directory) as entries:
                signature = tuple(
                    sorted(
                        (e.name, e.inode(), e.stat().st_mtime_ns, e.stat().st_size)
                        for e in entries
                        if e.name.endswith(".key") and e.is_file()
                    )
                )
        except OSError as exc:
            if self._keys:
                log.warning(
                    "authorized keys %s unreadable (%s): admitting none", self._directory, exc
                )
            self._signature, self._keys = None, {}
            return
        if signature == self._signature:
            return
        keys: dict[bytes, frozenset[str]] = {}
        for name, *_ in signature:
            try:
                key = _public_key_of(self._directory / name)
            except ConfigError as exc:
                log.warning("authorized keys: %s (skipped)", exc)
                continue
            keys[key] = keys.get(key, frozenset()) | {key_name(name)}
        if self._signature is not None:
            log.info("authorized keys %s: now %d keys", self._directory, len(keys))
        self._signature, self._keys = signature, keys


@dataclass
class GateStats:
    """What one node's gate refused (``Gate.statistics()``)."""

    admitted: int = 0
    """Connections whose key was in the authorized-keys directory."""
    refused_keys: int = 0
    """Connections refused by ZAP: a CURVE key not in the directory."""
    failed_handshakes: int = 0
    """Connections whose handshake failed: a plaintext peer, a wrong server key, a refusal."""


class Gate:
    """One node's ZAP domain: its key ring and what it admitted and refused.

    ``open`` registers it with its context's ZAP handler (started by the first gate of a
    context, stopped with the last); ``close`` unregisters it. Counters are written by the
    handler's thread and read by any (a copy under a lock).
    """

    _ids = itertools.count()

    def __init__(self, context: zmq.Context[zmq.Socket[bytes]], directory: Path, name: str):
        self.domain = f"dafka-{next(self._ids)}-{name}"
        self.name = name
        self.keys = KeyRing(directory)
        self._context = context
        self._lock = threading.Lock()
        self._stats = GateStats()
        self._refused_logged: set[bytes] = set()
        self._monitors: list[str] = []
        self._handler: ZapHandler | None = None

    @classmethod
    def open(cls, context: zmq.Context[zmq.Socket[bytes]], security: Security, name: str) -> Gate:
        gate = cls(context, security.authorized_keys, name)
        gate._handler = ZapHandler.attach(context, gate)
        return gate

    def close(self) -> None:
        if self._handler is not None:
            self._handler.detach(self)
            self._handler = None

    def statistics(self) -> GateStats:
        with self._lock:
            return GateStats(**vars(self._stats))

    def watch(self, sock: zmq.Socket[bytes]) -> None:
        """Count ``sock``'s failed handshakes (call in the socket's thread, before bind)."""
        address = f"inproc://{self.domain}-monitor-{len(self._monitors)}"
        sock.monitor(address, _HANDSHAKE_FAILURES)
        self._monitors.append(address)
        if self._handler is not None:
            self._handler.add_monitor(self, address)

    def decide(self, key: bytes, address: str) -> bool:
        """ZAP's answer for a CURVE client of this node (in the handler's thread)."""
        z85_key = z85.encode(key)
        allowed = self.keys.allows(z85_key)
        with self._lock:
            if allowed:
                self._stats.admitted += 1
            else:
                self._stats.refused_keys += 1
        if not allowed and z85_key not in self._refused_logged:
            if len(self._refused_logged) < 1024:
                self._refused_logged.add(z85_key)
            log.warning(
                "%s: refused a connection from %s: key %s is not authorized",
                self.name,
                address or "?",
                z85_key.decode(),
            )
        return allowed

    def handshake_failed(self, event: int, endpoint: str) -> None:
        with self._lock:
            self._stats.failed_handshakes += 1
            first = self._stats.failed_handshakes == 1
        log.log(
            logging.WARNING if first else logging.DEBUG,
            "%s: a connection to %s failed its CURVE handshake (event %d: a peer without a "
            "key, or expecting another server key)",
            self.name,
            endpoint,
            event,
        )


class ZapHandler:
    """The ZAP handler of one context: a thread answering every gate's domain.

    Requests for a domain no gate owns (plaintext sockets of the same context) are
    answered 200, as if there were no handler.
    """

    _by_context: dict[int, ZapHandler] = {}  # noqa: RUF012 - process-wide registry
    _registry_lock = threading.Lock()

    def __init__(self, context: zmq.Context[zmq.Socket[bytes]]) -> None:
        self._context = context
        self._gates: dict[bytes, Gate] = {}
        self._lock = threading.Lock()
        self._pending: list[tuple[Gate, str]] = []
        self._closing: list[Gate] = []
        self._stop = False
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="dafka-zap", daemon=True)

    @classmethod
    def attach(cls, context: zmq.Context[zmq.Socket[bytes]], gate: Gate) -> ZapHandler:
        with cls._registry_lock:
            handler = cls._by_context.get(id(context))
            if handler is None:
                handler = cls(context)
                handler._thread.start()
                handler._ready.wait()
                if handler._error is not None:
                    raise ConfigError(f"cannot start the ZAP handler: {handler._error}")
                cls._by_context[id(context)] = handler
            with handler._lock:
                handler._gates[gate.domain.encode()] = gate
            return handler

    def detach(self, gate: Gate) -> None:
        with self._registry_lock:
            with self._lock:
                self._gates.pop(gate.domain.encode(), None)
                self._closing.append(gate)
                last = not self._gates
                if last:
                    self._stop = True
                    self._by_context.pop(id(self._context), None)
            if last:
                self._thread.join()

    def add_monitor(self, gate: Gate, address: str) -> None:
        with self._lock:
            self._pending.append((gate, address))

    def _main(self) -> None:
        rep: zmq.Socket[bytes] | None = None
        try:
            rep = self._context.socket(zmq.REP)
            rep.setsockopt(zmq.LINGER, 0)
            rep.bind(ZAP_ENDPOINT)
        except zmq.ZMQError as exc:
            if rep is not None:
                rep.close()  # else the context could never terminate
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        monitors: dict[zmq.Socket[bytes], tuple[Gate, str]] = {}
        poller = zmq.Poller()
        poller.register(rep, zmq.POLLIN)
        try:
            while True:
                with self._lock:
                    stop, pending, closing = self._stop, self._pending, self._closing
                    self._pending, self._closing = [], []
                for gate, address in pending:
                    sock = self._context.socket(zmq.PAIR)
                    sock.setsockopt(zmq.LINGER, 0)
                    sock.connect(address)
                    poller.register(sock, zmq.POLLIN)
                    monitors[sock] = (gate, address)
                for sock, (gate, _) in list(monitors.items()):
                    if stop or gate in closing:
                        poller.unregister(sock)
                        sock.close()
                        del monitors[sock]
                if stop:
                    return
                for sock, _ in poller.poll(100):
                    if sock is rep:
                        self._answer(rep)
                    elif sock in monitors:
                        self._monitor_event(sock, monitors[sock][0])
        except BaseException:  # never die silently: every secured node would hang on ZAP
            log.exception("ZAP handler crashed; secured sockets refuse every connection")
            raise
        finally:
            # unbound at once: a close frees the inproc name only when the context's reaper
            # gets to it, and the next node of this context would find it taken
            with contextlib.suppress(zmq.ZMQError):
                rep.unbind(ZAP_ENDPOINT)
            rep.close()

    def _answer(self, rep: zmq.Socket[bytes]) -> None:
        frames = rep.recv_multipart()
        rep.send_multipart(self._reply(frames))

    def _reply(self, frames: list[bytes]) -> list[bytes]:
        """ZAP's reply (RFC 27) to one request."""
        if len(frames) < 6:
            return [b"1.0", b"", b"500", b"malformed ZAP request", b"", b""]
        _version, request_id, domain, address, _identity, mechanism = frames[:6]
        credentials = frames[6:]
        with self._lock:
            gate = self._gates.get(domain)
        if gate is None:
            return [b"1.0", request_id, b"200", b"OK", b"", b""]
        if mechanism != b"CURVE" or len(credentials) != 1 or len(credentials[0]) != 32:
            gate.handshake_failed(zmq.EVENT_HANDSHAKE_FAILED_AUTH, "ZAP")
            return [b"1.0", request_id, b"400", b"CURVE only", b"", b""]
        if gate.decide(credentials[0], address.decode("ascii", "replace")):
            return [b"1.0", request_id, b"200", b"OK", z85.encode(credentials[0]), b""]
        return [b"1.0", request_id, b"400", b"key not authorized", b"", b""]

    @staticmethod
    def _monitor_event(sock: zmq.Socket[bytes], gate: Gate) -> None:
        with contextlib.suppress(zmq.ZMQError):
            event = parse_monitor_message(sock.recv_multipart(zmq.NOBLOCK))
            if event["event"] & _HANDSHAKE_FAILURES:
                endpoint = event["endpoint"]
                gate.handshake_failed(
                    event["event"],
                    endpoint.decode() if isinstance(endpoint, bytes) else str(endpoint),
                )


def beyond_loopback(host: str) -> bool:
    """Whether binding ``host`` (an interface, ``*``, or a ``tcp://host:port`` endpoint)
    listens beyond this machine's loopback."""
    if host.startswith("tcp://"):
        host = host.removeprefix("tcp://").rsplit(":", 1)[0]
    return not is_loopback(host)


def warn_if_exposed(host: str, security: Security | None, name: str) -> None:
    """The one WARNING line of a plaintext node that listens beyond loopback (at start)."""
    if security is None and beyond_loopback(host):
        log.warning(
            "%s: listening on %s without security: anyone who reaches it can read and write "
            "every topic, and crash it inside libzmq (give --key and --authorized-keys; "
            "docs/security.md, docs/nodes.md)",
            name,
            host,
        )


def peer_key(frame: zmq.Frame) -> str:
    """The Z85 public key a message's connection authenticated with ("" if none)."""
    try:
        value = frame.get("User-Id")
    except zmq.ZMQError:
        return ""
    return value if isinstance(value, str) and len(value) == Z85_KEY_LENGTH else ""


__all__ = [
    "TOWER_KEY_NAME",
    "Gate",
    "GateStats",
    "KeyRing",
    "Security",
    "ZapHandler",
    "beyond_loopback",
    "keygen",
    "peer_key",
    "warn_if_exposed",
]
