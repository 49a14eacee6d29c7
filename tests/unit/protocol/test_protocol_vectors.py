"""Every hex vector of PROTOCOL.md, byte-exact in both directions.

The first group is copied from ``../shared/PROTOCOL.md`` section 1 (bytes checked on the wire
against C nodes). The second group covers the commands that page gives no vector for; their
hex is written by hand from the layout table there, field by field, so that a mistake in the
codec's layout table cannot hide behind a vector produced by the codec itself.
"""

from __future__ import annotations

import pytest

from dafka.protocol import (
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
    Message,
    PeerEndpoint,
    Record,
    StoreHello,
    Welcome,
    decode,
    decode_data,
    decode_discovery,
    encode,
)

ADDRESS = "0123abcd-4567-89ef-0123-456789abcdef"
ADDRESS_HEX = "30313233616263642d343536372d383965662d303132332d343536373839616263646566"

PROTOCOL_MD_VECTORS: list[tuple[str, Message, list[str]]] = [
    (
        "RECORD",
        Record("hello", ADDRESS, 5, b"CONTENT"),
        [
            "4d68656c6c6f0001" + "24" + ADDRESS_HEX + "0568656c6c6f0000000000000005",
            "434f4e54454e54",
        ],
    ),
    (
        "FETCH",
        Fetch(ADDRESS, "CONSUMERADDR", "hello", 5, 99995),
        [
            "4630313233616263642d343536372d383965662d303132332d34353637383961626364656600010c"
            "434f4e53554d4552414444520568656c6c6f00000000000000050001869b"
        ],
    ),
    (
        "ACK",
        Ack(ADDRESS, "hello", 5),
        [
            "4b30313233616263642d343536372d383965662d303132332d343536373839616263646566000105"
            "68656c6c6f0000000000000005"
        ],
    ),
    (
        "GET-HEADS",
        GetHeads("hello", "CONSUMERADDR"),
        ["4768656c6c6f00010c434f4e53554d455241444452"],
    ),
    (
        "CONSUMER-HELLO",
        ConsumerHello("STOREADDR", "CONSUMERADDR", ("hello", "world")),
        [
            "5753544f52454144445200010c434f4e53554d455241444452000000020000000568656c6c6f0000"
            "0005776f726c64"
        ],
    ),
    (
        "STORE-HELLO",
        StoreHello("CONSUMERADDR", "STOREADDR"),
        ["4c434f4e53554d45524144445200010953544f524541444452"],
    ),
]

# ID | inline topic | 00 | 01 | fields, from the table of PROTOCOL.md section 1.
HELLO = "68656c6c6f"  # "hello"
CONSUMER = "434f4e53554d455241444452"  # "CONSUMERADDR", 12 bytes
HAND_WRITTEN_VECTORS: list[tuple[str, Message, list[str]]] = [
    (
        "DIRECT-RECORD",
        DirectRecord("CONSUMERADDR", "hello", ADDRESS, 7, b""),
        ["44" + CONSUMER + "0001" + "24" + ADDRESS_HEX + "05" + HELLO + "0000000000000007", ""],
    ),
    (
        "HEAD",
        Head("hello", ADDRESS, 0xFFFFFFFFFFFFFFFF),
        ["48" + HELLO + "0001" + "24" + ADDRESS_HEX + "05" + HELLO + "ffffffffffffffff"],
    ),
    (
        "DIRECT-HEAD",
        DirectHead("CONSUMERADDR", "hello", ADDRESS, 256),
        ["45" + CONSUMER + "0001" + "24" + ADDRESS_HEX + "05" + HELLO + "0000000000000100"],
    ),
    (
        "CONSUMER-HELLO without topics",
        ConsumerHello("S", "C", ()),
        ["57" + "53" + "0001" + "0143" + "00000000"],
    ),
    (
        "RECORD with a non-UTF-8 topic",
        Record(b"\xff\x01".decode("utf-8", "surrogateescape"), "P", 1, b"\x00"),
        ["4dff01" + "0001" + "0150" + "02ff01" + "0000000000000001", "00"],
    ),
    (
        "HEADS-END (dafka's own): 3 heads sent, 2 stores known",
        HeadsEnd("CONSUMERADDR", "hello", "R", "W", 3, 2),
        ["41" + CONSUMER + "0001" + "05" + HELLO + "0152" + "0157" + "00000003" + "00000002"],
    ),
    (
        "LOG-START (dafka's own): held from 500",
        LogStart("CONSUMERADDR", "hello", ADDRESS, "R", 500),
        [
            "53"
            + CONSUMER
            + "0001"
            + "05"
            + HELLO
            + "24"
            + ADDRESS_HEX
            + "0152"
            + "00000000000001f4"
        ],
    ),
    ("node beacon", Beacon("N1", "", 5556), ["42", "4e31", "", "35353536"]),
    (
        "forwarded beacon",
        PeerEndpoint("N1", "tcp://10.0.0.1:5556"),
        ["42", "4e31", "7463703a2f2f31302e302e302e313a35353536"],
    ),
    ("tower welcome", Welcome(), ["57"]),
]

ALL_VECTORS = PROTOCOL_MD_VECTORS + HAND_WRITTEN_VECTORS


@pytest.mark.parametrize(("label", "message", "frames_hex"), ALL_VECTORS)
def test_encode_is_byte_exact(label: str, message: Message, frames_hex: list[str]) -> None:
    assert [frame.hex() for frame in encode(message)] == frames_hex


@pytest.mark.parametrize(("label", "message", "frames_hex"), ALL_VECTORS)
def test_decode_gives_the_message(label: str, message: Message, frames_hex: list[str]) -> None:
    frames = [bytes.fromhex(h) for h in frames_hex]
    decoded = decode(frames)
    assert decoded == message
    assert type(decoded) is type(message)


@pytest.mark.parametrize(("label", "message", "frames_hex"), PROTOCOL_MD_VECTORS)
def test_data_vectors_decode_on_a_data_socket(
    label: str, message: Message, frames_hex: list[str]
) -> None:
    assert decode_data([bytes.fromhex(h) for h in frames_hex]) == message


def test_discovery_vectors_decode_on_a_beacon_socket() -> None:
    for _label, message, frames_hex in HAND_WRITTEN_VECTORS[-3:]:
        assert decode_discovery([bytes.fromhex(h) for h in frames_hex]) == message


def test_decoding_twice_uses_the_header_cache_and_gives_the_same_answer() -> None:
    # The second decode of a header hits the cache of validated headers; a different
    # sequence and content must still come through.
    first = decode_data([bytes.fromhex(PROTOCOL_MD_VECTORS[0][2][0]), b"CONTENT"])
    frame0 = bytes.fromhex(PROTOCOL_MD_VECTORS[0][2][0])[:-8] + (6).to_bytes(8, "big")
    second = decode_data([frame0, b"OTHER"])
    assert first == Record("hello", ADDRESS, 5, b"CONTENT")
    assert second == Record("hello", ADDRESS, 6, b"OTHER")


def test_record_content_frame_is_not_copied() -> None:
    content = b"x" * 1000
    frames = encode(Record("t", "p", 1, content))
    assert frames[1] is content
    assert decode_data(frames).content is content  # type: ignore[union-attr]
