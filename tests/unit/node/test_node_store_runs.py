"""StoreMachine and producer runs (docs/guarantees.md, "A reused sequence: run epochs").

From a run's start on only that run's records, or a newer run's, belong: a newer run's
record or head sets an older run's records from its start aside (``KeepRuns``, kept by the
log, never deleted); an older run's record past a newer run's start is fenced; the store
answers FETCHes and GET-HEADS naming the run of each record; a restarted store knows the
runs it kept.
"""

from __future__ import annotations

from dafka.node import KeepRuns, StoreConfig, StoreMachine
from dafka.protocol import DirectHead, DirectRecord, Fetch, GetHeads, Head, Record
from dafka.testing import MemoryLog, ScriptedPeer

WID = "57000000000000000000000000000001"
RID = "52000000000000000000000000000002"
T, P = "hello", "w.0"


def make(log: MemoryLog | None = None) -> tuple[StoreMachine, ScriptedPeer, MemoryLog]:
    log = log if log is not None else MemoryLog()
    store = StoreMachine(WID, RID, log, StoreConfig(heads_refresh=None))
    peer = ScriptedPeer(store, log=log)
    for message in peer.recv_all():
        assert isinstance(message, GetHeads)
    return store, peer, log


def records(run: str, epoch: int, start: int, first: int, end: int) -> list[Record]:
    return [Record(T, P, s, f"{run}:{s}".encode(), epoch, start) for s in range(first, end)]


def test_a_newer_run_sets_the_older_runs_records_from_its_start_aside() -> None:
    store, peer, log = make()
    peer.send(*records("g1", 1, 0, 0, 6))  # run 1 sent 0..5; 3..5 were never acknowledged
    peer.recv_all()
    peer.send(*records("g2", 2, 3, 3, 5))  # run 2 resumed at 3
    assert peer.kept_runs == [KeepRuns(T, P, ((1, 0),)), KeepRuns(T, P, ((1, 0), (2, 3)), 3)]
    assert log.contents(T, P) == [b"g1:0", b"g1:1", b"g1:2", b"g2:3", b"g2:4"]
    assert [(s, c) for _, _, s, c in log.superseded] == [(3, b"g1:3"), (4, b"g1:4"), (5, b"g1:5")]
    assert log.runs(T, P) == ((1, 0), (2, 3))
    assert store.statistics().records_superseded == 3


def test_an_older_runs_records_past_a_newer_runs_start_are_fenced() -> None:
    store, peer, log = make()
    peer.send(*records("g1", 1, 0, 0, 3))
    peer.send(*records("g2", 2, 3, 3, 5))
    peer.recv_all()
    peer.send(*records("g1", 1, 0, 3, 8))  # a zombie of run 1, or late copies of it
    assert log.contents(T, P)[3:] == [b"g2:3", b"g2:4"]
    assert store.statistics().records_fenced == 5
    assert store.records_fenced == 5
    assert store.last_fenced == f"{T}/{P} at 7: run 1, where run 2 resumed at 3"
    peer.send(Head(T, P, 9, 1, 0))  # its head: ignored, nothing fetched
    assert not [m for m in peer.recv_all() if isinstance(m, Fetch)]
    assert store.statistics().records_fenced == 6
    peer.send(Record(T, P, 5, b"g2:5", 2, 4))  # run 2 with another start: malformed
    assert store.statistics().runs_refused == 1
    assert log.contents(T, P)[-1] == b"g2:4"


def test_a_head_of_a_newer_run_that_published_nothing_sets_aside_and_refetches() -> None:
    """The new run's first HEAD (resume point - 1, its start after it) reaches a store that
    took the old run's unacknowledged tail: the tail is set aside at once."""
    store, peer, log = make()
    peer.send(*records("g1", 1, 0, 0, 5))
    peer.recv_all()
    peer.send(Head(T, P, 2, 2, 3))
    assert peer.kept_runs[-1] == KeepRuns(T, P, ((1, 0), (2, 3)), 3)
    assert log.head(T, P) == 2
    assert store.durable_heads()[T, P] == 2
    peer.send(*records("g2", 2, 3, 3, 4))
    assert log.contents(T, P)[-1] == b"g2:3"


def test_a_store_repairs_from_another_stores_heads_and_records() -> None:
    """Another store's DIRECT-HEAD names the run of its head record; its FETCH answers the
    run of each record: a store holding an older run's tail learns, sets it aside and
    fetches the newer run's."""
    _, peer, log = make()
    peer.send(*records("g1", 1, 0, 0, 5))
    peer.recv_all()
    peer.send(DirectHead(WID, T, P, 6, 2, 3))  # another store holds run 2 from 3 to 6
    fetches = [m for m in peer.recv_all() if isinstance(m, Fetch)]
    assert fetches
    assert fetches[0].sequence == 3
    peer.send(*[DirectRecord(WID, T, P, s, f"g2:{s}".encode(), 2, 3) for s in range(3, 7)])
    assert log.contents(T, P) == [b"g1:0", b"g1:1", b"g1:2", b"g2:3", b"g2:4", b"g2:5", b"g2:6"]


def test_fetch_and_get_heads_answers_name_each_records_run() -> None:
    _, peer, _ = make()
    peer.send(*records("g1", 1, 0, 0, 3), *records("g2", 7, 3, 3, 5))
    peer.recv_all()
    peer.send(Fetch(P, "CONSUMER", T, 1, 10))
    replies = [m for m in peer.recv_all() if isinstance(m, DirectRecord)]
    assert [(m.sequence, m.epoch, m.run_start) for m in replies] == [
        (1, 1, 0),
        (2, 1, 0),
        (3, 7, 3),
        (4, 7, 3),
    ]
    peer.send(GetHeads(T, "CONSUMER"))
    assert [m for m in peer.recv_all() if isinstance(m, DirectHead)] == [
        DirectHead("CONSUMER", T, P, 4, 7, 3)
    ]


def test_a_restarted_store_knows_the_runs_it_kept() -> None:
    _, peer, log = make()
    peer.send(*records("g1", 1, 0, 0, 3), *records("g2", 2, 3, 3, 5))
    peer.recv_all()
    store, peer, _ = make(log)  # the same log, a new machine: a restart
    peer.send(*records("g1", 1, 0, 5, 7))
    assert store.statistics().records_fenced == 2
    assert log.head(T, P) == 4


def test_records_without_a_run_are_taken_as_before() -> None:
    """A C producer's records, or a C store's copies of ours, say no run."""
    store, peer, log = make()
    peer.send(*records("g1", 1, 0, 0, 3))
    peer.send(Record(T, P, 3, b"c:3"), Record(T, P, 1, b"dup"))
    assert log.contents(T, P) == [b"g1:0", b"g1:1", b"g1:2", b"c:3"]
    assert store.statistics().records_fenced == 0
