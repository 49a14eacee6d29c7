"""A mutation fuzzer for the codec, shared by the test suite and ``scripts/fuzz_codec.py``.

It starts from valid encodings of every message class (with edge values: empty content,
255-byte names, non-UTF-8 bytes, the largest integers) and damages them the way a network,
a buggy peer or an attacker would: truncation, bit flips, inserted and deleted bytes, extra,
missing and swapped frames, a different command ID, pure junk. Each case goes through
:func:`decode`, :func:`decode_data` and :func:`decode_discovery`, and :func:`check` demands:

* nothing but :class:`DecodeError` escapes, and not through the decoder's last-resort
  fallback (which would mean a case nobody handled explicitly);
* whatever decodes re-encodes to exactly the same frames (decoding accepts only canonical
  encodings, so two different byte strings never mean the same message).

Pure and deterministic for a given seed, so a failure can be replayed.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dafka.protocol._decode import decode, decode_data
from dafka.protocol._discovery import decode_discovery
from dafka.protocol._encode import encode
from dafka.protocol._errors import DecodeError
from dafka.protocol.messages import (
    Ack,
    Beacon,
    ConsumerHello,
    DirectHead,
    DirectRecord,
    Fetch,
    GetHeads,
    Head,
    HeadsEnd,
    LogStart,
    MemberBeat,
    Message,
    PeerEndpoint,
    Record,
    StoreHello,
    Welcome,
)

Frames = list[bytes]

_ID = "0123456789ABCDEF0123456789ABCDEF"
_LONG = "n" * 255
_ODD = b"\xff\xfe caf\xc3\xa9 \xed\xa0\x80".decode("utf-8", "surrogateescape")
_MAX64 = (1 << 64) - 1


def seed_messages() -> list[Message]:
    """Valid messages of every class, with the edge values a fuzzer should start from."""
    return [
        Record("hello", _ID, 5, b"CONTENT"),
        Record("t", "p", 0, b""),
        Record(_LONG, _LONG, _MAX64, bytes(range(256))),
        Record(_ODD, _ID, 1 << 32, b"\x00" * 100),
        DirectRecord("C" * 32, "hello", _ID, 7, b"x" * 100),
        DirectRecord(_ODD, _LONG, "p", _MAX64, b""),
        Record("hello", _ID, 7, b"CONTENT", 1_700_000_000_000, 5),
        DirectRecord("C" * 32, "hello", _ID, _MAX64, b"", _MAX64, _MAX64),
        Fetch(_ID, "CONSUMERADDR", "hello", 5, 99995),
        Fetch(_LONG, _ODD, "t", _MAX64, (1 << 32) - 1),
        Ack(_ID, "hello", 5),
        Ack("p", _LONG, _MAX64),
        Head("hello", _ID, 9),
        Head(_ODD, "p", 0),
        DirectHead("C" * 32, "hello", _ID, 3),
        GetHeads("hello", "CONSUMERADDR"),
        GetHeads("hello", "w.0", 1_700_000_000_000, 4),
        GetHeads(_ODD, "p.0", _MAX64, (1 << 32) - 1),
        ConsumerHello("STOREADDR", "CONSUMERADDR", ("hello", "world")),
        ConsumerHello("s", "c", ()),
        ConsumerHello("s", _ODD, (_LONG, _ODD, "x")),
        StoreHello("CONSUMERADDR", "STOREADDR"),
        HeadsEnd("CONSUMERADDR", "hello", "STOREADDR", "WRITERADDR", 3, 2),
        HeadsEnd(_ODD, _LONG, "s", "w", 0, 1),
        LogStart("CONSUMERADDR", "hello", _ID, "STOREADDR", 500),
        LogStart("c", _ODD, "p", _LONG, _MAX64),
        MemberBeat("g", _ID, 3, "", ("hello",), (_ID,), (("hello", "p.0"),), False, 1),
        MemberBeat(_LONG, _ODD, _MAX64, "worker-1", (), (), (), True, 0),
        Beacon(_ID, "", 5556),
        Beacon(_ODD, "127.0.0.1", 0),
        Beacon("n", "host.example", 65535),
        PeerEndpoint(_ID, "tcp://127.0.0.1:5556"),
        Welcome(),
    ]


def seed_corpus() -> list[Frames]:
    """The encodings of :func:`seed_messages`."""
    return [encode(m) for m in seed_messages()]


_INTERESTING = (0x00, 0x01, 0x02, 0x7F, 0x80, 0xFF, ord("M"), ord("B"), ord("W"))


def _mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    size = len(data)
    choice = rng.randrange(8)
    if choice == 0 and size:  # truncate
        return data[: rng.randrange(size)]
    if choice == 1 and size:  # flip one bit
        i = rng.randrange(size)
        return data[:i] + bytes((data[i] ^ (1 << rng.randrange(8)),)) + data[i + 1 :]
    if choice == 2 and size:  # overwrite one byte with an interesting or random value
        i = rng.randrange(size)
        value = rng.choice(_INTERESTING) if rng.random() < 0.5 else rng.randrange(256)
        return data[:i] + bytes((value,)) + data[i + 1 :]
    if choice == 3:  # insert bytes
        i = rng.randrange(size + 1)
        return data[:i] + rng.randbytes(rng.randrange(1, 4)) + data[i:]
    if choice == 4 and size:  # delete a range
        i = rng.randrange(size)
        return data[:i] + data[i + rng.randrange(1, 5) :]
    if choice == 5:  # append junk
        return data + rng.randbytes(rng.randrange(1, 9))
    if choice == 6 and size:  # another command ID
        return bytes((rng.choice(b"MDFKHEGWLBX\x00\xff"),)) + data[1:]
    return rng.randbytes(rng.randrange(0, 40))  # junk


def mutate(frames: Sequence[bytes], rng: random.Random) -> Frames:
    """One damaged copy of ``frames``: one to three byte or frame mutations."""
    out = list(frames)
    for _ in range(rng.randrange(1, 4)):
        choice = rng.randrange(10)
        if choice < 6 and out:
            i = rng.randrange(len(out))
            out[i] = _mutate_bytes(out[i], rng)
        elif choice == 6 and out:  # drop a frame
            del out[rng.randrange(len(out))]
        elif choice == 7:  # add a frame
            out.insert(rng.randrange(len(out) + 1), rng.randbytes(rng.randrange(0, 12)))
        elif choice == 8 and out:  # duplicate a frame
            out.append(out[rng.randrange(len(out))])
        elif len(out) > 1:  # swap two frames
            i, j = rng.sample(range(len(out)), 2)
            out[i], out[j] = out[j], out[i]
    return out


def random_frames(rng: random.Random) -> Frames:
    """Frames with no valid ancestry at all."""
    return [rng.randbytes(rng.randrange(0, 64)) for _ in range(rng.randrange(0, 5))]


_DECODERS: tuple[Callable[[Sequence[bytes]], Message], ...] = (
    decode,
    decode_data,
    decode_discovery,
)


def check(frames: Frames, decoder: Callable[[Sequence[bytes]], Message] = decode) -> bool:
    """Decode ``frames``; True if it decoded, False if it was refused.

    Raises :class:`AssertionError` (with the frames) if the codec misbehaves; any exception
    other than :class:`DecodeError` propagates as is.
    """
    try:
        message = decoder(frames)
    except DecodeError as exc:
        if exc.__cause__ is not None:
            raise AssertionError(f"fallback error {exc!r} for {frames!r}") from exc
        return False
    again = encode(message)
    if again != frames:
        raise AssertionError(f"{frames!r} decoded to {message!r}, which encodes to {again!r}")
    return True


@dataclass
class FuzzStats:
    """What a fuzz run did."""

    cases: int = 0
    decoded: int = 0
    refused: int = 0
    seconds: float = 0.0


def run(cases: int | None = None, seconds: float | None = None, seed: int = 0) -> FuzzStats:
    """Fuzz until ``cases`` cases were checked and (if given) ``seconds`` have passed."""
    if cases is None and seconds is None:
        raise ValueError("give cases, seconds or both")
    rng = random.Random(seed)
    corpus = seed_corpus()
    stats = FuzzStats()
    start = time.perf_counter()
    deadline = start + (seconds or 0.0)
    while True:
        if (cases is None or stats.cases >= cases) and (
            seconds is None or (stats.cases % 1024 == 0 and time.perf_counter() >= deadline)
        ):
            break
        roll = rng.random()
        if roll < 0.05:
            frames = random_frames(rng)
        elif roll < 0.10:
            frames = list(rng.choice(corpus))
        else:
            frames = mutate(rng.choice(corpus), rng)
        if check(frames, _DECODERS[stats.cases % 3]):
            stats.decoded += 1
        else:
            stats.refused += 1
        stats.cases += 1
    stats.seconds = time.perf_counter() - start
    return stats


__all__ = ["FuzzStats", "check", "mutate", "random_frames", "run", "seed_corpus", "seed_messages"]
