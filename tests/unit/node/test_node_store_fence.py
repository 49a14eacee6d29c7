"""StoreMachine and a fencing resume (docs/guarantees.md, "Fencing resume").

A named producer's new run asks for heads with its epoch and partition count (a fencing
GET-HEADS): before the store answers, it refuses the older runs' own records of those
partitions past what it holds. So a record of an older
run that comes after the answer - a live predecessor's - is refused (its producer hears an
ACK naming the new run) instead of being taken, ACKed and then set aside when the new run's
first record lands on the same sequence. Copies from other stores are still taken (a store
catching up keeps catching up), and the new run's own first record or HEAD begins it.
"""

from __future__ import annotations

from dafka.node import KeepRuns, StoreConfig, StoreMachine
from dafka.node._store import MAX_NAME_FENCES
from dafka.protocol import Ack, DirectHead, DirectRecord, GetHeads, Head, Record
from dafka.testing import MemoryLog, ScriptedPeer

WID = "57000000000000000000000000000001"
RID = "52000000000000000000000000000002"
T = "hello"


def make() -> tuple[StoreMachine, ScriptedPeer, MemoryLog]:
    log = MemoryLog()
    store = StoreMachine(WID, RID, log, StoreConfig(heads_refresh=None))
    peer = ScriptedPeer(store, log=log)
    peer.recv_all()
    return store, peer, log


def records(partition: str, run: str, epoch: int, start: int, first: int, end: int) -> list[Record]:
    return [Record(T, partition, s, f"{run}:{s}".encode(), epoch, start) for s in range(first, end)]


def test_an_older_runs_record_after_the_fencing_answer_is_refused_not_acked() -> None:
    store, peer, log = make()
    peer.send(*records("w.0", "g1", 1, 0, 0, 5))
    peer.recv_all()
    peer.send(GetHeads(T, "w.0", 2, 2))  # run 2 of "w" (2 partitions) resumes
    answer = peer.recv_all()
    assert [m for m in answer if isinstance(m, DirectHead)] == [
        DirectHead("w.0", T, "w.0", 4, 1, 0)
    ]
    assert peer.kept_runs[-1] == KeepRuns(T, "w.0", ((1, 0),))  # the fence is not a run
    # run 1 is still alive: its next record reached the store after the answer
    peer.send(*records("w.0", "g1", 1, 0, 5, 6))
    assert log.contents(T, "w.0")[-1] == b"g1:4"  # before: taken and ACKed, then set aside
    assert store.statistics().records_fenced == 1
    acks = [m for m in peer.recv_all() if isinstance(m, Ack)]
    assert acks == [Ack("w.0", T, 4, 2, 5)]  # names run 2: run 1 is fenced at once
    peer.send(*records("w.0", "g2", 2, 5, 5, 7))  # run 2 resumed after the answer's head
    assert log.contents(T, "w.0")[5:] == [b"g2:5", b"g2:6"]
    assert store.statistics().records_superseded == 0


def test_a_store_catching_up_still_takes_the_older_runs_copies_after_a_fence() -> None:
    """Another store took run 1's 3 and 4 before its own fence (its answer said head 4):
    this store, fenced at 2, refuses run 1's own record 3 but takes the copies of 3 and 4
    from the other store (its later answers then say 4), and run 2 begins at 5."""
    store, peer, log = make()
    peer.send(*records("w.0", "g1", 1, 0, 0, 3))
    peer.send(GetHeads(T, "w.0", 2, 1))
    peer.send(*records("w.0", "g1", 1, 0, 3, 4))  # run 1's live record: refused here
    assert store.statistics().records_fenced == 1
    peer.recv_all()
    peer.send(
        DirectRecord(WID, T, "w.0", 3, b"g1:3", 1, 0),
        DirectRecord(WID, T, "w.0", 4, b"g1:4", 1, 0),
    )  # before (fence as a run from 3): both refused, the store stuck at 2
    assert log.contents(T, "w.0")[3:] == [b"g1:3", b"g1:4"]
    peer.send(GetHeads(T, "w.0", 2, 1))  # run 2's resume asks again
    assert [m.sequence for m in peer.recv_all() if isinstance(m, DirectHead)] == [4]
    peer.send(Head(T, "w.0", 4, 2, 5))  # run 2 resumed at 5
    assert peer.kept_runs[-1] == KeepRuns(T, "w.0", ((1, 0), (2, 5)))
    peer.send(*records("w.0", "g2", 2, 5, 5, 6))
    assert log.contents(T, "w.0") == [b"g1:0", b"g1:1", b"g1:2", b"g1:3", b"g1:4", b"g2:5"]
    assert store.statistics().runs_refused == 0
    assert store.statistics().records_superseded == 0


def test_a_fence_never_moves_a_run_the_store_holds_records_of() -> None:
    store, peer, log = make()
    peer.send(GetHeads(T, "w.0", 2, 1))
    peer.send(*records("w.0", "g2", 2, 0, 0, 2))  # run 2 started at 0: held
    peer.send(GetHeads(T, "w.0", 2, 1))  # its resume asked again: nothing changes
    peer.send(Record(T, "w.0", 2, b"g2:2", 2, 1))  # run 2 with another start: malformed
    assert store.statistics().runs_refused == 1
    assert log.runs(T, "w.0") == ((2, 0),)
    peer.send(GetHeads(T, "w.0", 1, 1))  # an older run's fence: nothing
    assert log.runs(T, "w.0") == ((2, 0),)
    assert log.contents(T, "w.0") == [b"g2:0", b"g2:1"]


def test_a_plain_get_heads_fences_nothing() -> None:
    store, peer, log = make()
    peer.send(*records("w.0", "g1", 1, 0, 0, 2))
    peer.send(GetHeads(T, "w.0"))
    peer.send(*records("w.0", "g1", 1, 0, 2, 3))
    assert log.contents(T, "w.0")[-1] == b"g1:2"
    assert store.statistics().records_fenced == 0


def test_an_older_runs_head_past_the_newer_runs_start_is_answered_with_the_fencing_ack() -> None:
    # two live runs of one name share their node ids: the store may hear the older run's
    # HEADs and never its late records (its SUB follows the endpoint beaconed last). Its
    # HEAD past the newer run's start gets the ACK naming the newer run, as its records do
    store, peer, _log = make()
    peer.send(*records("w.0", "g1", 1, 0, 0, 3))
    peer.recv_all()
    peer.send(GetHeads(T, "w.0", 2, 1))  # run 2 resumes after 2, and writes nothing
    peer.recv_all()
    peer.send(Head(T, "w.0", 3, 1, 0))  # run 1 published 3 (never reached the store)
    acks = [m for m in peer.recv_all() if isinstance(m, Ack)]
    assert acks == [Ack("w.0", T, 2, 2, 3)]  # before: nothing, it waited its timeout
    assert store.statistics().records_fenced == 1
    peer.send(DirectHead(WID, T, "w.0", 3, 1, 0))  # a store's word, not the producer's
    assert not [m for m in peer.recv_all() if isinstance(m, Ack)]


def test_a_fence_makes_no_partition() -> None:
    """A GET-HEADS naming 2**32 - 1 partitions (the chaos soak's hostile node sent one)
    fences those the store holds and creates none."""
    store, peer, log = make()
    peer.send(*records("w.0", "g1", 1, 0, 0, 2))
    peer.send(*records("w.7", "g1", 1, 0, 0, 1))
    peer.send(*records("wx.0", "g1", 1, 0, 0, 1))
    peer.send(GetHeads(T, "w.0", 2, (1 << 32) - 1))
    assert store.statistics().partitions == 3  # before: every name.i up to max_partitions
    peer.send(Record(T, "w.7", 1, b"late", 1, 0), Record(T, "wx.0", 1, b"other", 1, 0))
    assert log.contents(T, "w.7") == [b"g1:0"]  # w.7 is fenced, wx.0 is not
    assert log.contents(T, "wx.0") == [b"g1:0", b"other"]


def test_a_fence_passes_over_partition_names_that_are_not_a_decimal_index() -> None:
    """Partition names are a peer's: "w.²" is a digit to ``str.isdigit`` but not to ``int``
    (the store's thread raised ValueError and the store died), "w." and 5,000 digits is
    past ``int``'s limit, "w.01" no producer writes. A fencing GET-HEADS from "w.0" is
    answered and fences only "w.0" and "w.1"."""
    store, peer, log = make()
    odd = ["w.²", "w.٣", "w." + "1" * 5000, "w.01", "w.", "w.1x"]
    for name in ["w.0", "w.1", *odd]:
        peer.send(Record(T, name, 0, b"g1:0", 1, 0))
    peer.recv_all()
    peer.send(GetHeads(T, "w.0", 2, 4))
    answered = {m.producer for m in peer.recv_all() if isinstance(m, DirectHead)}
    assert answered == {"w.0", "w.1", *odd}
    for name in ["w.0", "w.1", *odd]:
        peer.send(Record(T, name, 1, b"g1:1", 1, 0))  # run 1's next record
    assert store.statistics().records_fenced == 2  # w.0 and w.1 only
    for name in odd:
        assert log.contents(T, name) == [b"g1:0", b"g1:1"]


WALL = 1_800_000_000.0
"""The store's wall clock at ``now`` 0 (s since the Unix epoch): runs' epochs are wall ms."""


def test_a_fence_far_past_the_stores_clock_fences_nothing() -> None:
    """A fencing GET-HEADS naming run 2**64 - 1 (forged, or a clock far ahead) is answered
    and fences nothing: before, it refused the live run's records and every later run's
    (each run's epoch is its start in wall ms, all below it) until the store restarted."""
    log = MemoryLog()
    store = StoreMachine(WID, RID, log, StoreConfig(heads_refresh=None), now=0.0, wall=WALL)
    peer = ScriptedPeer(store, log=log)
    peer.recv_all()
    run1 = int(WALL * 1000) - 60_000
    peer.send(*records("w.0", "g1", run1, 0, 0, 3))
    peer.recv_all()
    peer.send(GetHeads(T, "w.0", (1 << 64) - 1, 1))
    heads = [m for m in peer.recv_all() if isinstance(m, DirectHead)]
    assert [h.sequence for h in heads] == [2]  # answered all the same
    assert store.statistics().fences_refused == 1
    assert "run 18446744073709551615" in store.last_fence_refused
    peer.send(*records("w.0", "g1", run1, 0, 3, 4))  # the live run goes on
    assert log.contents(T, "w.0")[-1] == b"g1:3"
    assert store.statistics().records_fenced == 0
    peer.advance(10.0)  # a new run, 10 s later: its fence and records are taken
    run2 = int(WALL * 1000) + 10_000
    peer.send(GetHeads(T, "w.0", run2, 1))
    peer.send(*records("w.0", "g1", run1, 0, 4, 5))  # the older run, fenced by run 2
    assert store.statistics().records_fenced == 1
    peer.send(*records("w.0", "g2", run2, 4, 4, 6))
    assert log.contents(T, "w.0")[3:] == [b"g1:3", b"g2:4", b"g2:5"]
    assert store.statistics().fences_refused == 1


def test_a_fence_within_max_fence_ahead_of_the_stores_clock_is_taken() -> None:
    """A producer's clock may run ahead of the store's: up to ``max_fence_ahead`` its fence
    holds as any other."""
    log = MemoryLog()
    config = StoreConfig(heads_refresh=None, max_fence_ahead=30.0)
    store = StoreMachine(WID, RID, log, config, now=0.0, wall=WALL)
    peer = ScriptedPeer(store, log=log)
    peer.recv_all()
    peer.send(*records("w.0", "g1", 1, 0, 0, 2))
    peer.send(GetHeads(T, "w.0", int(WALL * 1000) + 29_000, 1))
    peer.send(*records("w.0", "g1", 1, 0, 2, 3))
    assert store.statistics().records_fenced == 1
    assert store.statistics().fences_refused == 0
    peer.send(GetHeads(T, "wx.0", int(WALL * 1000) + 31_000, 1))
    assert store.statistics().fences_refused == 1


def test_a_store_holding_nothing_of_the_partitions_fences_them_when_they_come() -> None:
    """A store that holds nothing of a name's partitions (a new or emptied store) fences
    them all the same: run 1's record that comes after run 2's answer is refused, not
    ACKed (before: taken and ACKed, then set aside when run 2's first record came on the
    same sequence - an acknowledged record lost), and run 2 begins there at once."""
    store, peer, log = make()
    peer.send(GetHeads(T, "w.0", 2, 2))  # run 2 of "w" (2 partitions) resumes: nothing held
    assert not [m for m in peer.recv_all() if isinstance(m, DirectHead)]
    assert store.statistics().partitions == 0  # still no partition made for a fence
    peer.send(*records("w.0", "g1", 1, 0, 0, 2), *records("w.1", "g1", 1, 0, 0, 1))
    peer.send(*records("w.2", "g1", 1, 0, 0, 1), *records("wx.0", "g1", 1, 0, 0, 1))
    assert not [m for m in peer.recv_all() if isinstance(m, Ack) and m.producer in ("w.0", "w.1")]
    assert store.statistics().records_fenced == 3  # w.0 twice, w.1; not w.2 nor wx.0
    assert log.contents(T, "w.2") == [b"g1:0"]
    assert log.contents(T, "wx.0") == [b"g1:0"]
    peer.send(DirectRecord(WID, T, "w.1", 0, b"g1:0", 1, 0))  # another store's copy: taken
    assert log.contents(T, "w.1") == [b"g1:0"]
    peer.send(*records("w.0", "g2", 2, 0, 0, 2))  # run 2 begins at 0
    assert log.contents(T, "w.0") == [b"g2:0", b"g2:1"]
    acks = [m for m in peer.recv_all() if isinstance(m, Ack) and m.producer == "w.0"]
    assert acks[-1] == Ack("w.0", T, 1, 2, 0)
    assert store.statistics().records_superseded == 0


def test_fences_of_names_the_store_holds_nothing_of_are_bounded() -> None:
    """One entry per name, the oldest forgotten past ``MAX_NAME_FENCES``."""
    store, peer, _log = make()
    for n in range(MAX_NAME_FENCES + 5):
        peer.send(GetHeads(T, f"n{n}.0", 2, (1 << 32) - 1))
    peer.recv_all()
    assert store.statistics().partitions == 0
    peer.send(
        *records("n0.0", "g1", 1, 0, 0, 1), *records(f"n{MAX_NAME_FENCES}.7", "g1", 1, 0, 0, 1)
    )
    assert store.statistics().records_fenced == 1  # n0 was forgotten
