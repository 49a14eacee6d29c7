"""MEMBER (``Y``): a consumer group member's beat, both directions (docs/groups.md).

Frame 0 follows the data commands' rule (``Y | group | 0x00 | 0x01 | member | sequence``);
frame 1 is the member's state as canonical JSON: sorted keys, no spaces, ASCII only. A
state is rare (a few beats a second per member) and of varying shape (lists of topics,
members and partitions), so readability wins over packing. Canonical means the decoder can
keep the codec's promise ``encode(decode(f)) == f``: it re-encodes what it parsed and
refuses anything that differs (other spacing, key order, extra keys).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from dafka.protocol import _layouts as lay
from dafka.protocol._errors import DecodeError, EncodeError
from dafka.protocol._ids import VERSION
from dafka.protocol._names import name, name_problem, text, wire
from dafka.protocol.messages import MemberBeat

_KEYS = (
    "acks",
    "claims",
    "digest",
    "generation",
    "instance",
    "leaving",
    "started",
    "topics",
    "view",
)
_HANDED = "handed"
"""Present only when a member lists handovers: a beat without any has the original form."""
_TENURE = "tenure"
"""Present only when the member's tenure clock is above 0 (the same rule)."""
_OPTIONAL = (_HANDED, _TENURE)
_MAX_DIGEST = 64
MAX_STATE_BYTES = 16 * 1024 * 1024
"""The largest frame 1 decoded (about 200,000 claimed partitions)."""


def _names(values: object, what: str) -> list[str]:
    if not isinstance(values, tuple | list):
        raise EncodeError(f"{what} must be a tuple of str, got {type(values).__name__}")
    for value in values:
        name(value, f"a name in {what}")
    return list(values)


def _state(m: MemberBeat) -> bytes:
    claims = m.claims
    if not isinstance(claims, tuple | list):
        raise EncodeError(f"claims must be a tuple of pairs, got {type(claims).__name__}")
    pairs = []
    for pair in claims:
        if not (isinstance(pair, tuple | list) and len(pair) == 2):
            raise EncodeError(f"a claim must be a (topic, partition) pair, got {pair!r}")
        name(pair[0], "a claim's topic")
        name(pair[1], "a claim's partition")
        pairs.append(list(pair))
    if m.instance != "":
        name(m.instance, "instance")
    else:
        wire(m.instance, "instance")
    if not isinstance(m.leaving, bool):
        raise EncodeError(f"leaving must be a bool, got {type(m.leaving).__name__}")
    if not (isinstance(m.started, int) and 0 <= m.started < 1 << 63):
        raise EncodeError(f"started must be an int in [0, 2**63), got {m.started!r}")
    if not (isinstance(m.generation, int) and 0 <= m.generation < 1 << 63):
        raise EncodeError(f"generation must be an int in [0, 2**63), got {m.generation!r}")
    if not (isinstance(m.digest, str) and m.digest.isascii() and len(m.digest) <= _MAX_DIGEST):
        raise EncodeError(f"digest must be ASCII of at most {_MAX_DIGEST} characters")
    if not isinstance(m.acks, tuple | list):
        raise EncodeError(f"acks must be a tuple of (member, generation), got {m.acks!r}")
    acks: dict[str, int] = {}
    for ack in m.acks:
        if not (isinstance(ack, tuple | list) and len(ack) == 2):
            raise EncodeError(f"an ack must be a (member, generation) pair, got {ack!r}")
        name(ack[0], "an ack's member")
        if not (isinstance(ack[1], int) and 0 <= ack[1] < 1 << 63) or ack[0] in acks:
            raise EncodeError(f"bad ack {ack!r} (a generation in [0, 2**63), once per member)")
        acks[ack[0]] = ack[1]
    if list(acks) != sorted(acks):
        raise EncodeError("acks must be sorted by member (as the JSON object's keys are)")
    if not isinstance(m.handed, tuple | list):
        raise EncodeError(f"handed must be a tuple of 5-tuples, got {m.handed!r}")
    handed = []
    for entry in m.handed:
        if not (isinstance(entry, tuple | list) and len(entry) == 5):
            raise EncodeError(
                f"a handover must be (topic, partition, offset, index, version), got {entry!r}"
            )
        name(entry[0], "a handover's topic")
        name(entry[1], "a handover's partition")
        for number in entry[2:]:
            if not (type(number) is int and 0 <= number < 1 << 63):
                raise EncodeError(f"bad handover {entry!r} (numbers in [0, 2**63))")
        handed.append(list(entry))
    state = {
        "acks": acks,
        "claims": pairs,
        "digest": m.digest,
        "generation": m.generation,
        "instance": m.instance,
        "leaving": m.leaving,
        "started": m.started,
        "topics": _names(m.topics, "topics"),
        "view": _names(m.view, "view"),
    }
    if handed:
        state[_HANDED] = handed
    if not (type(m.tenure) is int and 0 <= m.tenure < 1 << 63):
        raise EncodeError(f"tenure must be an int in [0, 2**63), got {m.tenure!r}")
    if m.tenure:
        state[_TENURE] = m.tenure
    return _dump(state)


def _dump(state: dict[str, Any]) -> bytes:
    text_ = json.dumps(state, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return text_.encode("ascii")


def encode_member(m: MemberBeat) -> list[bytes]:
    """The two frames of ``m``, or :class:`EncodeError` naming the bad field."""
    layout = lay.MEMBER
    header = b"".join(
        [
            layout.command_id,
            name(m.group, "group"),
            lay.PREFIX_END,
            bytes((len(member := name(m.member, "member")),)),
            member,
        ]
    )
    sequence = m.sequence
    if not (isinstance(sequence, int) and 0 <= sequence < 1 << 64):
        raise EncodeError(f"sequence {sequence!r} is outside uint64")
    return [header + lay.SEQUENCE.pack(sequence), _state(m)]


def _text_list(value: object, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DecodeError(f"state: {what} is not a list of strings", "MEMBER")
    out = []
    for v in value:
        try:
            raw = v.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            raise DecodeError(f"state: a name in {what} is not valid text", "MEMBER") from None
        problem = name_problem(raw)
        if problem is not None:
            raise DecodeError(f"state: a name in {what} {problem}", "MEMBER")
        out.append(v)
    return tuple(out)


def decode_member(frames: Sequence[bytes]) -> MemberBeat:
    """Frames -> :class:`MemberBeat`; :class:`DecodeError` for anything else."""
    layout = lay.MEMBER
    if len(frames) != 2:
        raise DecodeError(f"{len(frames)} frames, expected 2", layout.name)
    frame, body = frames[0], frames[1]
    end = frame.find(b"\0", 1)
    if end < 0:
        raise DecodeError("truncated: the inline group has no NUL terminator", layout.name)
    group = frame[1:end]
    problem = name_problem(group)
    if problem is not None:
        raise DecodeError(f"inline topic (group) {problem}", layout.name)
    pos = end + 1
    if len(frame) < pos + 2:
        raise DecodeError("truncated: the version byte or member is missing", layout.name)
    if frame[pos] != VERSION:
        raise DecodeError(f"unsupported version {frame[pos]} (only {VERSION} exists)", layout.name)
    length = frame[pos + 1]
    member = frame[pos + 2 : pos + 2 + length]
    if len(member) != length:
        raise DecodeError("truncated: member", layout.name)
    problem = name_problem(member)
    if problem is not None:
        raise DecodeError(f"member {problem}", layout.name)
    pos += 2 + length
    if len(frame) - pos != 8:
        raise DecodeError(f"sequence takes 8 bytes but {len(frame) - pos} are left", layout.name)
    (sequence,) = lay.SEQUENCE.unpack_from(frame, pos)
    if len(body) > MAX_STATE_BYTES:
        raise DecodeError(f"state of {len(body)} bytes (at most {MAX_STATE_BYTES})", layout.name)
    try:
        state = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise DecodeError(f"state is not JSON: {exc}", layout.name) from None
    if (
        not isinstance(state, dict)
        or tuple(sorted(k for k in state if k not in _OPTIONAL)) != _KEYS
    ):
        raise DecodeError(
            f"state must be an object with exactly {list(_KEYS)} (and {list(_OPTIONAL)})",
            layout.name,
        )
    claims_raw = state["claims"]
    if not isinstance(claims_raw, list):
        raise DecodeError("state: claims is not a list", layout.name)
    claims = []
    for pair in claims_raw:
        topic_partition = _text_list(pair, "a claim")
        if len(topic_partition) != 2:
            raise DecodeError("state: a claim is not a [topic, partition] pair", layout.name)
        claims.append((topic_partition[0], topic_partition[1]))
    instance = state["instance"]
    if not isinstance(instance, str):
        raise DecodeError("state: instance is not a string", layout.name)
    if instance:
        _text_list([instance], "instance")
    leaving, started = state["leaving"], state["started"]
    if not isinstance(leaving, bool):
        raise DecodeError("state: leaving is not a bool", layout.name)
    if type(started) is not int or not 0 <= started < 1 << 63:
        raise DecodeError("state: started is not an int in [0, 2**63)", layout.name)
    generation, digest, acks_raw = state["generation"], state["digest"], state["acks"]
    if type(generation) is not int or not 0 <= generation < 1 << 63:
        raise DecodeError("state: generation is not an int in [0, 2**63)", layout.name)
    if not isinstance(digest, str) or not digest.isascii() or len(digest) > _MAX_DIGEST:
        raise DecodeError(f"state: digest is not ASCII of at most {_MAX_DIGEST}", layout.name)
    if not isinstance(acks_raw, dict):
        raise DecodeError("state: acks is not an object", layout.name)
    members = _text_list(list(acks_raw), "acks")
    acks = []
    for member_id, ack in zip(members, acks_raw.values(), strict=True):
        if type(ack) is not int or not 0 <= ack < 1 << 63:
            raise DecodeError("state: an ack is not an int in [0, 2**63)", layout.name)
        acks.append((member_id, ack))
    handed_raw = state.get(_HANDED, [])
    if not isinstance(handed_raw, list):
        raise DecodeError("state: handed is not a list", layout.name)
    handed: list[tuple[str, str, int, int, int]] = []
    for entry in handed_raw:
        if not (isinstance(entry, list) and len(entry) == 5):
            raise DecodeError("state: a handover is not a 5-element list", layout.name)
        topic, partition = _text_list(entry[:2], "a handover")
        numbers = entry[2:]
        if not all(type(n) is int and 0 <= n < 1 << 63 for n in numbers):
            raise DecodeError("state: a handover's numbers are not ints in [0, 2**63)", layout.name)
        handed.append((topic, partition, numbers[0], numbers[1], numbers[2]))
    tenure = state.get(_TENURE, 0)
    if type(tenure) is not int or not 0 <= tenure < 1 << 63:
        raise DecodeError("state: tenure is not an int in [0, 2**63)", layout.name)
    beat = MemberBeat(
        text(group),
        text(member),
        sequence,
        instance,
        _text_list(state["topics"], "topics"),
        _text_list(state["view"], "view"),
        tuple(claims),
        leaving,
        started,
        generation,
        digest,
        tuple(acks),
        tuple(handed),
        tenure,
    )
    try:
        canonical = _state(beat)
    except EncodeError as exc:
        raise DecodeError(f"state: {exc}", layout.name) from None
    if canonical != body:
        raise DecodeError("state is not in canonical form", layout.name)
    return beat


__all__ = ["MAX_STATE_BYTES", "decode_member", "encode_member"]
