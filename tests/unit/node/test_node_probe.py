"""ProbeMachine: one-record FETCHes under its own id; only answers to its probes are kept."""

from __future__ import annotations

from dafka.node import ProbeMachine
from dafka.protocol import DirectHead, DirectRecord, Fetch, GetHeads
from dafka.testing import ScriptedPeer

PID = "B0B0B0B0B0B0B0B0B0B0B0B0B0B0B0B0"


def test_a_probe_is_a_one_record_fetch_and_its_answer_is_kept_once() -> None:
    machine = ProbeMachine(PID)
    peer = ScriptedPeer(machine)
    machine.subscribe("t", peer.clock.now)
    peer.drain()
    peer.expect(GetHeads)
    peer.send(DirectHead(PID, "t", "P", 99))
    assert machine.heads() == {("t", "P"): 99}
    machine.probe("t", "P", 50, peer.clock.now)
    peer.drain()
    assert peer.expect(Fetch) == Fetch("P", PID, "t", 50, 1)
    peer.send(
        DirectRecord(PID, "t", "P", 50, b"fifty"),
        DirectRecord(PID, "t", "P", 50, b"fifty"),  # a second store's answer
        DirectRecord(PID, "t", "P", 51, b"not asked"),
        DirectRecord("SOMEONE-ELSE", "t", "P", 50, b"x"),
    )
    assert machine.take_found() == {("t", "P", 50): b"fifty"}
    assert machine.take_found() == {}
    assert machine.statistics().dropped_foreign == 3
