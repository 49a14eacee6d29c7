"""100,000 random and mutated frame lists through the decoders: only DecodeError escapes.

Longer runs: ``scripts/fuzz_codec.py --seconds N``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dafka.protocol import Ack, DecodeError, Message, Record, decode, encode, fuzzing
from dafka.protocol._decode import HEADER_CACHE_LIMIT


def test_hundred_thousand_damaged_messages_only_ever_raise_decode_error() -> None:
    stats = fuzzing.run(cases=100_000, seed=20260)
    assert stats.cases == 100_000
    # Both outcomes occur in bulk, so the mutations neither always nor never break things.
    assert stats.decoded > 1_000
    assert stats.refused > 50_000


def test_seed_corpus_decodes_to_the_seed_messages() -> None:
    for message, frames in zip(fuzzing.seed_messages(), fuzzing.seed_corpus(), strict=True):
        assert decode(frames) == message
        assert fuzzing.check(frames)


def test_mutations_are_deterministic_for_a_seed() -> None:
    corpus = fuzzing.seed_corpus()
    first = [fuzzing.mutate(f, random.Random(7)) for f in corpus]
    again = [fuzzing.mutate(f, random.Random(7)) for f in corpus]
    assert first == again
    assert first != corpus


def _crashing_decoder(frames: Sequence[bytes]) -> Message:
    raise IndexError("boom")


def _lenient_decoder(frames: Sequence[bytes]) -> Message:
    return Record("t", "p", 1, b"whatever")


def _fallback_decoder(frames: Sequence[bytes]) -> Message:
    try:
        frames[99]
    except IndexError as exc:
        raise DecodeError("malformed") from exc
    raise AssertionError("unreachable")


def test_the_oracle_catches_broken_decoders() -> None:
    frames = encode(Record("hello", "p", 1, b"x"))
    with pytest.raises(IndexError):
        fuzzing.check(frames, _crashing_decoder)
    with pytest.raises(AssertionError, match="which encodes to"):
        fuzzing.check(frames, _lenient_decoder)
    with pytest.raises(AssertionError, match="fallback"):
        fuzzing.check(frames, _fallback_decoder)


def test_run_needs_a_limit() -> None:
    with pytest.raises(ValueError, match="give cases"):
        fuzzing.run()


@given(st.lists(st.binary(max_size=80), max_size=5))
def test_arbitrary_frames_are_decoded_or_refused_cleanly(frames: list[bytes]) -> None:
    fuzzing.check(frames)


@given(st.lists(st.binary(max_size=40), max_size=3), st.sampled_from(fuzzing.seed_corpus()))
def test_valid_frames_with_junk_around_them_are_checked(
    extra: list[bytes], frames: list[bytes]
) -> None:
    fuzzing.check([*frames, *extra])
    fuzzing.check([frames[0] + b"".join(extra), *frames[1:]])


def test_header_caches_stay_correct_when_full() -> None:
    count = HEADER_CACHE_LIMIT + 100
    messages = [Ack(f"producer-{i}", "t", i) for i in range(count)]
    for message in messages + messages[:200]:
        assert decode(encode(message)) == message
