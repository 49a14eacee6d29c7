"""Beacon-socket traffic: node beacons, tower-forwarded endpoints and the tower's welcome.

Not part of the RFC; bytes from the C reference (``../shared/PROTOCOL.md`` section 3). Every
frame is ASCII text, with no inline topic and no version byte:

* node -> tower: ``B | node id | advertised host | port as decimal``;
* tower -> nodes: ``B | node id | tcp://host:port``, and from a secured (CURVE) tower a 4th
  frame, the Z85 public key the beacon authenticated with (``B | id | tcp://h:p | key``: told
  from a node beacon by its 40 characters where a port has at most 5 digits);
* tower -> every new subscriber: the single frame ``W``.
"""

from __future__ import annotations

from collections.abc import Sequence

from dafka.protocol._errors import DecodeError, EncodeError
from dafka.protocol._frames import all_bytes, as_frames, preview
from dafka.protocol._ids import BEACON_ID, WELCOME_ID
from dafka.protocol._names import name, name_problem, text, wire
from dafka.protocol.messages import Beacon, DiscoveryMessage, PeerEndpoint, Welcome

WELCOME = Welcome()
MAX_PORT = 65535
Z85_KEY_LENGTH = 40
"""A CURVE public key (32 bytes) in Z85 text."""
_Z85 = frozenset(
    b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
)
_MAX_PORT_DIGITS = len(str(MAX_PORT))


def encode_beacon(m: Beacon) -> list[bytes]:
    """``B | node id | host | port``; the port as C prints it (``%d``)."""
    port = m.port
    if not isinstance(port, int):
        raise EncodeError(f"port must be an int, got {type(port).__name__}")
    if not 0 <= port <= MAX_PORT:
        raise EncodeError(f"port {port} is outside 0..{MAX_PORT}")
    return [BEACON_ID, name(m.node_id, "node_id"), wire(m.host, "host"), b"%d" % port]


def encode_peer_endpoint(m: PeerEndpoint) -> list[bytes]:
    """``B | node id | endpoint``, as a tower forwards a beacon."""
    endpoint = wire(m.endpoint, "endpoint")
    if not endpoint:
        raise EncodeError("endpoint must not be empty")
    frames = [BEACON_ID, name(m.node_id, "node_id"), endpoint]
    if m.public_key:
        key = wire(m.public_key, "public_key")
        if len(key) != Z85_KEY_LENGTH:
            raise EncodeError(f"public key must be {Z85_KEY_LENGTH} Z85 characters")
        frames.append(key)
    return frames


def encode_welcome(m: Welcome) -> list[bytes]:
    """The single frame ``W``."""
    return [WELCOME_ID]


def _port(raw: bytes) -> int:
    # Only the canonical decimal form: digits, no sign, no spaces, no leading zero.
    if (
        not raw
        or len(raw) > _MAX_PORT_DIGITS
        or not raw.isdigit()
        or (raw[0] == ord("0") and raw != b"0")
    ):
        raise DecodeError(f"port {preview(raw)} is not a decimal number", "BEACON")
    port = int(raw)
    if port > MAX_PORT:
        raise DecodeError(f"port {port} is outside 0..{MAX_PORT}", "BEACON")
    return port


def _node_id(raw: bytes, command: str) -> str:
    problem = name_problem(raw)
    if problem is not None:
        raise DecodeError(f"node id {problem}", command)
    return text(raw)


def _free_text(raw: bytes, what: str, command: str) -> str:
    if b"\0" in raw:
        raise DecodeError(f"{what} contains a NUL byte", command)
    return text(raw)


def _decode(frames: Sequence[bytes]) -> DiscoveryMessage:
    count = len(frames)
    if count == 0:
        raise DecodeError("no frames")
    first = frames[0]
    if first == WELCOME_ID:
        if count != 1:
            raise DecodeError(f"{count} frames, expected 1", "WELCOME")
        return WELCOME
    if first != BEACON_ID:
        raise DecodeError(f"not a beacon or welcome: frame 0 is {preview(first)}")
    if count == 4 and len(frames[3]) == Z85_KEY_LENGTH:
        key = frames[3]
        if not _Z85.issuperset(key):
            raise DecodeError("public key is not Z85 text", "PEER-ENDPOINT")
        return _peer_endpoint(frames, key.decode("ascii"))
    if count == 4:
        return Beacon(
            _node_id(frames[1], "BEACON"),
            _free_text(frames[2], "host", "BEACON"),
            _port(frames[3]),
        )
    if count == 3:
        return _peer_endpoint(frames, "")
    raise DecodeError(f"{count} frames, expected 4 (node beacon) or 3 (forwarded)", "BEACON")


def decode_discovery(frames: Sequence[bytes]) -> DiscoveryMessage:
    """Decode beacon-socket frames: :class:`Beacon`, :class:`PeerEndpoint` or :class:`Welcome`.

    Raises :class:`DecodeError`, and nothing else, for anything that is not one of them.
    """
    try:
        return _decode(frames)
    except DecodeError:
        raise
    except Exception as exc:
        if all_bytes(frames):
            raise DecodeError(f"malformed beacon frames ({exc})") from exc
        return _decode(as_frames(frames))


def _peer_endpoint(frames: Sequence[bytes], key: str) -> PeerEndpoint:
    """A tower's forwarded beacon: ``B | id | endpoint`` (C; key "") or ``... | Z85 key``."""
    endpoint = frames[2]
    if not endpoint:
        raise DecodeError("endpoint is empty", "PEER-ENDPOINT")
    return PeerEndpoint(
        _node_id(frames[1], "PEER-ENDPOINT"),
        _free_text(endpoint, "endpoint", "PEER-ENDPOINT"),
        key,
    )


__all__ = [
    "MAX_PORT",
    "WELCOME",
    "decode_discovery",
    "encode_beacon",
    "encode_peer_endpoint",
    "encode_welcome",
]
