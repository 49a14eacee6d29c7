"""decode(encode(m)) == m for every message class, over generated messages."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dafka.protocol import (
    LAYOUTS,
    DataMessage,
    DiscoveryMessage,
    Message,
    decode,
    decode_data,
    decode_discovery,
    encode,
)
from tests.unit.protocol.protocol_strategies import DATA_STRATEGIES, DISCOVERY_STRATEGIES


@pytest.mark.parametrize("cls", list(DATA_STRATEGIES), ids=lambda c: c.__name__)
def test_data_message_round_trips(cls: type[DataMessage]) -> None:
    @given(DATA_STRATEGIES[cls])
    def check(message: DataMessage) -> None:
        frames = encode(message)
        assert all(type(f) is bytes for f in frames)
        assert len(frames) == (2 if LAYOUTS[type(message)].content else 1)
        assert decode_data(frames) == message
        assert decode(frames) == message
        # Decoding twice goes through the cache of validated headers: same answer.
        assert decode_data(frames) == message
        assert encode(decode_data(frames)) == frames

    check()


@pytest.mark.parametrize("cls", list(DISCOVERY_STRATEGIES), ids=lambda c: c.__name__)
def test_discovery_message_round_trips(cls: type[DiscoveryMessage]) -> None:
    @given(DISCOVERY_STRATEGIES[cls])
    def check(message: DiscoveryMessage) -> None:
        frames = encode(message)
        assert decode_discovery(frames) == message
        assert decode(frames) == message

    check()


@given(st.one_of(*DATA_STRATEGIES.values(), *DISCOVERY_STRATEGIES.values()))
def test_decoded_message_has_the_exact_class(message: Message) -> None:
    assert type(decode(encode(message))) is type(message)


@given(st.one_of(*DATA_STRATEGIES.values()))
def test_frame0_starts_with_id_and_ends_topic_with_nul_and_version(message: DataMessage) -> None:
    frame0 = encode(message)[0]
    end = frame0.index(b"\0")
    assert frame0[0:1].isupper()
    assert frame0[end + 1] == 1
