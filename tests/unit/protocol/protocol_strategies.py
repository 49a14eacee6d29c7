"""Hypothesis strategies for every message class, shared by the protocol tests."""

from __future__ import annotations

from hypothesis import strategies as st

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
    MemberBeat,
    PeerEndpoint,
    Record,
    StoreHello,
    Welcome,
)


def _from_wire(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


# Names from arbitrary bytes (what a C peer may send: any byte but NUL) and from readable
# text (what Python users write), 1-255 bytes once encoded.
names = st.one_of(
    st.binary(min_size=1, max_size=255).map(lambda b: b.replace(b"\0", b"_")).map(_from_wire),
    st.text(min_size=1, max_size=40).filter(
        lambda s: "\0" not in s and len(s.encode("utf-8", "surrogateescape")) <= 255
    ),
)
free_text = st.one_of(
    st.binary(max_size=80).map(lambda b: b.replace(b"\0", b"_")).map(_from_wire),
    st.text(max_size=40).filter(lambda s: "\0" not in s),
)
u64 = st.integers(min_value=0, max_value=(1 << 64) - 1)
u32 = st.integers(min_value=0, max_value=(1 << 32) - 1)
contents = st.binary(max_size=300)


@st.composite
def _runs(draw: st.DrawFn) -> tuple[int, int, int]:
    """(sequence, epoch, run_start): no run trailer (epoch 0), or one that is valid."""
    sequence = draw(u64)
    if draw(st.booleans()):
        return sequence, 0, 0
    return sequence, draw(u64.filter(bool)), draw(st.integers(0, sequence))


records = st.builds(
    lambda t, p, run, c: Record(t, p, run[0], c, run[1], run[2]), names, names, _runs(), contents
)
direct_records = st.builds(
    lambda r, t, p, run, c: DirectRecord(r, t, p, run[0], c, run[1], run[2]),
    names,
    names,
    names,
    _runs(),
    contents,
)
fetches = st.builds(Fetch, names, names, names, u64, u32)


@st.composite
def _head_runs(draw: st.DrawFn) -> tuple[int, int, int]:
    """(sequence, epoch, run_start) of a head: its run may start anywhere."""
    if draw(st.booleans()):
        return draw(u64), 0, 0
    return draw(u64), draw(u64.filter(bool)), draw(u64)


acks = st.builds(lambda p, t, run: Ack(p, t, *run), names, names, _head_runs())
heads = st.builds(lambda t, p, run: Head(t, p, *run), names, names, _head_runs())
direct_heads = st.builds(
    lambda r, t, p, run: DirectHead(r, t, p, *run), names, names, names, _head_runs()
)
get_heads = st.builds(GetHeads, names, names)
consumer_hellos = st.builds(ConsumerHello, names, names, st.lists(names, max_size=6).map(tuple))
store_hellos = st.builds(StoreHello, names, names)
member_beats = st.builds(
    MemberBeat,
    names,
    names,
    u64,
    st.one_of(st.just(""), names),
    st.lists(names, max_size=4).map(tuple),
    st.lists(names, max_size=4).map(tuple),
    st.lists(st.tuples(names, names), max_size=4).map(tuple),
    st.booleans(),
    st.integers(min_value=0, max_value=(1 << 63) - 1),
    st.integers(min_value=0, max_value=(1 << 63) - 1),
    st.text(alphabet="0123456789abcdef", max_size=16),
    st.dictionaries(names, st.integers(min_value=0, max_value=(1 << 63) - 1), max_size=3).map(
        lambda acks: tuple(sorted(acks.items()))
    ),
    st.lists(
        st.tuples(names, names, *[st.integers(min_value=0, max_value=(1 << 63) - 1)] * 3),
        max_size=3,
    ).map(tuple),
)
heads_ends = st.builds(HeadsEnd, names, names, names, names, u32, u32)
log_starts = st.builds(LogStart, names, names, names, names, u64)
beacons = st.builds(Beacon, names, free_text, st.integers(min_value=0, max_value=65535))
peer_endpoints = st.builds(PeerEndpoint, names, free_text.filter(bool))
welcomes = st.just(Welcome())

DATA_STRATEGIES = {
    Record: records,
    DirectRecord: direct_records,
    Fetch: fetches,
    Ack: acks,
    Head: heads,
    DirectHead: direct_heads,
    GetHeads: get_heads,
    ConsumerHello: consumer_hellos,
    StoreHello: store_hellos,
    MemberBeat: member_beats,
    HeadsEnd: heads_ends,
    LogStart: log_starts,
}
DISCOVERY_STRATEGIES = {Beacon: beacons, PeerEndpoint: peer_endpoints, Welcome: welcomes}
data_messages = st.one_of(*DATA_STRATEGIES.values())
discovery_messages = st.one_of(*DISCOVERY_STRATEGIES.values())
