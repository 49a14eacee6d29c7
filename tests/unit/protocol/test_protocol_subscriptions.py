"""SUB prefixes per node (PROTOCOL.md section 2) and XPUB subscription notices."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dafka.protocol import (
    HEADS_END_ID,
    LOG_START_ID,
    MEMBER_ID,
    Ack,
    ConsumerHello,
    DataMessage,
    DecodeError,
    DirectHead,
    DirectRecord,
    EncodeError,
    Fetch,
    GetHeads,
    Head,
    HeadsEnd,
    LogStart,
    MemberBeat,
    Record,
    StoreHello,
    consumer_subscriptions,
    consumer_topic_subscriptions,
    encode,
    parse_prefix,
    parse_subscription_notice,
    producer_subscriptions,
    store_hello_subscriber,
    store_reader_subscriptions,
    store_writer_subscriptions,
    subscription_notice,
    subscription_prefix,
)
from tests.unit.protocol.protocol_strategies import (
    data_messages,
    heads_ends,
    log_starts,
    member_beats,
    names,
)

P = "0123456789ABCDEF0123456789ABCDEF"


def test_prefix_is_id_plus_topic_without_terminator() -> None:
    assert subscription_prefix(Record, "hello") == b"Mhello"
    assert subscription_prefix(b"K", P) == b"K" + P.encode()
    assert subscription_prefix("F", P) == b"F" + P.encode()
    assert subscription_prefix(Head) == b"H"
    odd = b"\xff".decode("utf-8", "surrogateescape")
    assert subscription_prefix(GetHeads, odd) == b"G\xff"


@pytest.mark.parametrize("command", [b"X", "MM", b"", "B", int, object])
def test_prefix_of_an_unknown_command_is_refused(command: object) -> None:
    with pytest.raises(EncodeError):
        subscription_prefix(command, "t")  # type: ignore[arg-type]


@pytest.mark.parametrize("topic", ["x" * 256, "a\0", 5])
def test_prefix_with_a_bad_topic_is_refused(topic: object) -> None:
    with pytest.raises(EncodeError):
        subscription_prefix(Record, topic)  # type: ignore[arg-type]


def test_node_subscription_sets_are_those_of_protocol_md() -> None:
    pid = P.encode()
    assert producer_subscriptions(P) == (b"K" + pid, b"F" + pid)
    assert consumer_subscriptions("CID") == (b"DCID", b"ECID", b"LCID")
    assert consumer_topic_subscriptions("hello") == (b"Mhello", b"Hhello")
    assert store_writer_subscriptions("WID") == (b"DWID", b"M", b"H")
    assert store_reader_subscriptions("RID") == (b"F", b"G", b"WRID")


@pytest.mark.parametrize(
    "call",
    [
        lambda: producer_subscriptions(""),
        lambda: consumer_subscriptions("x" * 256),
        lambda: consumer_topic_subscriptions(""),
        lambda: store_writer_subscriptions("a\0"),
        lambda: store_reader_subscriptions(""),
    ],
)
def test_node_subscriptions_refuse_bad_ids(call) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(EncodeError):
        call()


def _receivers(message: DataMessage) -> dict[str, tuple[bytes, ...]]:
    """Who must receive ``message``, by the subscription sets of PROTOCOL.md section 2."""
    if isinstance(message, Record):
        return {
            "consumer": consumer_topic_subscriptions(message.topic),
            "store writer": store_writer_subscriptions("any"),
        }
    if isinstance(message, Head):
        return {
            "consumer": consumer_topic_subscriptions(message.topic),
            "store writer": store_writer_subscriptions("any"),
        }
    if isinstance(message, DirectRecord):
        return {
            "consumer": consumer_subscriptions(message.recipient),
            "store writer": store_writer_subscriptions(message.recipient),
        }
    if isinstance(message, DirectHead | StoreHello):
        recipient = message.recipient if isinstance(message, DirectHead) else message.consumer
        return {"consumer": consumer_subscriptions(recipient)}
    if isinstance(message, Fetch):
        return {
            "producer": producer_subscriptions(message.producer),
            "store reader": store_reader_subscriptions("any"),
        }
    if isinstance(message, Ack):
        return {"producer": producer_subscriptions(message.producer)}
    if isinstance(message, GetHeads):
        return {"store reader": store_reader_subscriptions("any")}
    if isinstance(message, MemberBeat):
        return {"group member": (MEMBER_ID + message.group.encode("utf-8", "surrogateescape"),)}
    if isinstance(message, HeadsEnd | LogStart):  # dafka's own: the asker subscribes to it
        command = HEADS_END_ID if isinstance(message, HeadsEnd) else LOG_START_ID
        return {"dafka asker": (command + message.recipient.encode("utf-8", "surrogateescape"),)}
    assert isinstance(message, ConsumerHello)
    return {"store reader": store_reader_subscriptions(message.store)}


@given(data_messages)
def test_every_message_reaches_its_receivers_through_their_prefixes(
    message: DataMessage,
) -> None:
    frame0 = encode(message)[0]
    for node, prefixes in _receivers(message).items():
        assert any(frame0.startswith(p) for p in prefixes), node


@given(member_beats, names)
def test_no_c_node_subscription_ever_matches_a_member_beat(beat: MemberBeat, name: str) -> None:
    """MEMBER is dafka's own: whatever the group and whatever ids and topics C nodes use,
    none of their subscriptions is a prefix of a beat, so their XPUBs never send them one."""
    frame0 = encode(beat)[0]
    every = (
        producer_subscriptions(name)
        + consumer_subscriptions(name)
        + consumer_topic_subscriptions(name)
        + store_writer_subscriptions(name)
        + store_reader_subscriptions(name)
    )
    assert not any(frame0.startswith(p) for p in every)


@given(st.one_of(heads_ends, log_starts), names)
def test_no_c_node_subscription_ever_matches_a_that_is_all_or_log_start(
    message: HeadsEnd | LogStart, name: str
) -> None:
    """HEADS-END and LOG-START are dafka's own answers: no C node's subscription is a prefix
    of one, so a C peer's XPUB never sends it one and a C store never has to know them."""
    frame0 = encode(message)[0]
    every = (
        producer_subscriptions(name)
        + consumer_subscriptions(name)
        + consumer_topic_subscriptions(name)
        + store_writer_subscriptions(name)
        + store_reader_subscriptions(name)
    )
    assert not any(frame0.startswith(p) for p in every)


def test_addressed_messages_miss_nodes_with_other_ids_of_the_same_length() -> None:
    other = P[:-1] + "0"
    assert encode(Ack(P, "t", 1))[0].startswith(producer_subscriptions(P)[0])
    assert not any(encode(Ack(P, "t", 1))[0].startswith(p) for p in producer_subscriptions(other))
    direct = encode(DirectRecord(P, "t", "p", 1, b""))[0]
    assert not any(direct.startswith(p) for p in consumer_subscriptions(other))
    assert not any(direct.startswith(p) for p in store_writer_subscriptions(other)[:1])


def test_notices_round_trip() -> None:
    assert parse_subscription_notice(b"\x01Mhello") == (True, b"Mhello")
    assert parse_subscription_notice(b"\x00M") == (False, b"M")
    assert parse_subscription_notice(b"\x01") == (True, b"")
    for subscribed in (True, False):
        notice = subscription_notice(subscribed, b"LCID")
        assert parse_subscription_notice(notice) == (subscribed, b"LCID")


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        (b"", "empty subscription notice"),
        (b"\x02M", "starts with 0x02"),
        (b"Mhello", "starts with 0x4d"),
        ("x", "not str"),
        (None, "not NoneType"),
    ],
)
def test_bad_notices_are_refused(frame: object, reason: str) -> None:
    with pytest.raises(DecodeError, match=reason):
        parse_subscription_notice(frame)  # type: ignore[arg-type]


def test_notice_needs_bytes() -> None:
    with pytest.raises(EncodeError):
        subscription_notice(True, "M")  # type: ignore[arg-type]


def test_parse_prefix() -> None:
    assert parse_prefix(b"Mhello") == (b"M", "hello")
    assert parse_prefix(b"F") == (b"F", "")
    for bad in (b"", b"Xhello", b"M" + b"x" * 256, b"Ma\0", "Mhello"):
        with pytest.raises(DecodeError):
            parse_prefix(bad)  # type: ignore[arg-type]


def test_store_hello_subscriber_picks_consumer_ids() -> None:
    assert store_hello_subscriber(b"LCID") == "CID"
    assert store_hello_subscriber(b"L") is None
    assert store_hello_subscriber(b"DCID") is None
    assert store_hello_subscriber(b"L" + b"x" * 256) is None
