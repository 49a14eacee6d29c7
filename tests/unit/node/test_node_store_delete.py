"""StoreMachine.on_deleted (a topic delete's tombstone applied): the writer moves past the cut,
ACKs through it (a producer's in-flight records up to it are released), never fetches below
it, and takes what follows it; a restarted store keeps the cut (DeletionMarks)."""

from __future__ import annotations

from collections.abc import Mapping

from dafka.node import StoreConfig, StoreMachine
from dafka.protocol import Ack, Fetch, GetHeads, Head, Record
from dafka.testing import MemoryLog, ScriptedPeer

WID = "57000000000000000000000000000001"
RID = "52000000000000000000000000000002"


class MarkedLog(MemoryLog):
    """A MemoryLog that also says what was deleted (as ``Storage.deleted()``)."""

    def __init__(self, deleted: Mapping[tuple[str, str], int] | None = None) -> None:
        super().__init__()
        self._marks = dict(deleted or {})

    def deleted(self) -> Mapping[tuple[str, str], int]:
        return self._marks

    def cut(self, topic: str, partition: str, cut: int) -> None:
        """What ``Storage.delete_through`` does to a log that holds nothing above ``cut``:
        empty, continuing at ``cut + 1``."""
        self._marks[(topic, partition)] = cut
        self._parts.pop((topic, partition), None)
        self.append(topic, partition, cut + 1, [])


def make(log: MemoryLog, ask: tuple[str, ...] = ()) -> tuple[StoreMachine, ScriptedPeer]:
    store = StoreMachine(WID, RID, log, StoreConfig(heads_refresh=None, ask_topics=ask))
    return store, ScriptedPeer(store, log=log)


def test_a_lagging_store_moves_past_the_cut_and_acks_through_it() -> None:
    log = MarkedLog()
    store, peer = make(log)
    peer.send(Record("t", "P", 0, b"a"), Record("t", "P", 1, b"b"))
    peer.recv_all()
    peer.send(Record("t", "P", 5, b"f"))  # 2..4 missing: a FETCH is out
    assert isinstance(peer.recv_all()[-1], Fetch)
    log.cut("t", "P", 9)
    store.on_deleted("t", "P", 9, peer.clock.now)
    peer.drain()
    assert peer.recv_all() == [Ack("P", "t", 9)]  # no FETCH below the cut, ever
    peer.advance(30.0)
    assert not [m for m in peer.recv_all() if isinstance(m, Fetch)]
    peer.send(Record("t", "P", 7, b"late"))  # in flight before the delete: dropped
    peer.send(Record("t", "P", 10, b"k"))  # after the cut: stored
    assert log.contents("t", "P") == [b"k"]
    assert store.durable_heads()[("t", "P")] == 10
    peer.send(Head("t", "P", 8))  # a producer that lost its ACK: ACKed again
    assert Ack("P", "t", 10) in peer.recv_all()


def test_a_restarted_store_keeps_the_cut_and_asks_for_the_tombstones() -> None:
    log = MarkedLog({("t", "P"): 41})
    store, peer = make(log, ask=("__dafka_deletes",))
    asked = [m.topic for m in peer.recv_all() if isinstance(m, GetHeads)]
    assert "__dafka_deletes" in asked  # even though it holds none of it
    peer.send(Head("t", "P", 45))
    fetch = next(m for m in peer.recv_all() if isinstance(m, Fetch))
    assert fetch.sequence == 42  # after the cut, not from 0
    assert store.durable_heads()[("t", "P")] == 41
