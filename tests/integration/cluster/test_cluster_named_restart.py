"""Issue 18, path 1: a named producer restarted while one store lags resumes after the
highest stored head, never behind it.

A tower and two stores run as processes; named producer runs (``cluster_client.py
produce-named``, one unbatched partition) follow each other with the same name. Store B holds
the first 5,000 records and is then paused (SIGSTOP) while the next run stores 15,000 more in
store A alone: B lags. The third run restarts while B lags *and* A answers late (A is paused
for up to ``STALL`` seconds from the moment the run starts, as a busy or starved store would
be): B's heads (4,999) come first. Settling on them reused sequences A holds: both stores
treated the new records as duplicates or diverged, and ``flush()`` said stored (the old
resume started at 5,000). The resume must continue at 20,000, and both stores must end
with every run's records, each with the content of the run that published it.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from dafka.server import free_port_pair
from tests.integration.cluster.cluster_client import named_payload, tag_of
from tests.integration.cluster.cluster_probe import HeadsProbe, read_log
from tests.integration.cluster.cluster_procs import (
    _TOWER_READY,
    DAFKA,
    DEADLINE,
    Proc,
    Processes,
    TowerProc,
    wait_until,
)

TOPIC = "named-restart"
NAME = "w"
PARTITION = f"{NAME}.0"
RUNS = [("g1", 5_000), ("g1b", 15_000), ("g2", 1_000)]
STALL = 0.5
"""Seconds store A stays paused once the third run starts (less if it resumed before)."""
SLOW_BEACONS = "1.0"
"""The third run's beacon interval: its settle window is max(0.5, 1.5 * 1.0) = 1.5 s, which
A's late answer (at most STALL + a turn) fits in with room to spare on a loaded machine."""


def tower_on_port_pair(procs: Processes) -> TowerProc:
    """The named producer takes towers as ``host:port`` (XPUB on port + 1)."""
    port = free_port_pair()
    sub, pub = f"tcp://127.0.0.1:{port}", f"tcp://127.0.0.1:{port + 1}"
    proc = procs.spawn("tower", [*DAFKA, "tower", "--sub", sub, "--pub", pub])
    proc.wait_log(_TOWER_READY)
    return TowerProc(proc, sub, pub)


@pytest.mark.timeout(240)
def test_a_named_producer_restarting_while_a_store_lags_resumes_after_the_highest_head(
    procs: Processes, tmp_path: Path
) -> None:
    tower = tower_on_port_pair(procs)
    a = procs.store(tmp_path / "a", [tower])
    b = procs.store(tmp_path / "b", [tower])
    probe = HeadsProbe([tower.sub_endpoint])
    try:

        def run(tag: str, records: int) -> Proc:
            return procs.produce_named([tower], TOPIC, NAME, tag, records)

        first = run("g1", 5_000)
        assert first.wait_exit() == 0, procs.describe()
        assert first.require("done")["start"] == 0
        probe.heads(b.reader_port, TOPIC, {PARTITION: 4_999})  # B holds run one
        b.proc.send_signal(signal.SIGSTOP)  # B lags from here on

        second = run("g1b", 15_000)
        assert second.wait_exit() == 0, procs.describe()
        assert second.require("done")["start"] == 5_000
        probe.heads(a.reader_port, TOPIC, {PARTITION: 19_999})

        third = procs.produce_named(
            [tower], TOPIC, NAME, "g2", 1000, "--wait-line", "--beacon-interval", SLOW_BEACONS
        )
        third.wait_event("waiting")
        a.proc.send_signal(signal.SIGSTOP)  # A will answer late...
        b.proc.send_signal(signal.SIGCONT)  # ...B first, with 4,999 (its source, A, is paused)
        third.send_line("go")
        # The fault lasts STALL seconds, or less if the run resumed already (it then settled
        # on B's heads alone: the bug this test is about).
        stall_end = time.monotonic() + STALL
        while time.monotonic() < stall_end and third.last("resumed") is None:
            time.sleep(0.01)
        a.proc.send_signal(signal.SIGCONT)
        resumed = third.wait_event("resumed")
        assert resumed["start"] == 20_000, (
            f"resumed at {resumed['start']:,} instead of 20,000: the sequences "
            f"{resumed['start']:,}..{resumed['start'] + 999:,} are run two's in store A"
        )
        assert third.wait_exit() == 0, procs.describe()
        done = third.require("done")
        assert done["flushed"], done
        assert done["acked"] == 1_000, done
        assert done["in_order"], done

        for store in (a, b):  # both converge on all 21,000 records
            heads = probe.heads(store.reader_port, TOPIC, {PARTITION: 20_999}, timeout=DEADLINE)
            assert heads.get(PARTITION) == 20_999, (store.data_dir.name, heads)
    finally:
        probe.close()
    for store in (a, b):
        assert store.proc.stop() == 0, procs.describe()
    logs = [read_log(store.data_dir)[(TOPIC, PARTITION)] for store in (a, b)]
    assert logs[0] == logs[1], "the stores diverged"
    expected = []
    start = 0
    for tag, count in RUNS:
        expected += [(s, named_payload(s, tag)) for s in range(start, start + count)]
        start += count
    held = logs[0]
    wrong = [(s, tag_of(c)) for (s, c), want in zip(held, expected, strict=False) if c != want[1]]
    assert len(held) == len(expected), f"{len(held)} records held, expected {len(expected)}"
    assert not wrong, f"{len(wrong)} with another run's content, first {wrong[:3]}"


@pytest.mark.timeout(240)
def test_a_store_restarted_while_its_peer_is_paused_still_counts_it(
    procs: Processes, tmp_path: Path
) -> None:
    """The chaos soak's named restart: store B killed, A paused while B restarts. B knew no
    other store once its peers_settle passed and said so ("that is all, of 1 store"): a
    named producer resuming then settled on B's lower heads alone (962 acknowledged
    records lost). B keeps the stores it counts in its data directory and counts them
    again after a restart, so its answer asks the producer to wait for A's."""
    tower = tower_on_port_pair(procs)
    a = procs.store(tmp_path / "a", [tower])
    b = procs.store(tmp_path / "b", [tower])
    probe = HeadsProbe([tower.sub_endpoint])
    try:
        wait_until(
            lambda: a.reader_id in _read_or_empty(b.data_dir / "stores-known"),
            "store B to keep store A in its list",
        )
        b.proc.kill()
        a.proc.send_signal(signal.SIGSTOP)
        try:
            b = procs.store(b.data_dir, [tower], name="store-b-again")
            probe.heads(b.reader_port, TOPIC, {}, until_end=True)
            end = probe.last_end
            assert end is not None, "store B never said that is all"
            assert end.stores == 2, f"B counted {end.stores} store(s) without A"
        finally:
            a.proc.send_signal(signal.SIGCONT)
    finally:
        probe.close()


def _read_or_empty(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""
