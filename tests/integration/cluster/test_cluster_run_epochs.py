"""A reused sequence on a store that lagged through a restart (docs/guarantees.md, "A reused
sequence: run epochs"), with real processes.

A tower and two stores run as processes; named producer runs (``cluster_client.py
produce-named``, one unbatched partition) follow each other with the same name:

1. run g1 stores 1,000 records in both stores;
2. store A is paused (SIGSTOP); run g2 (``min_stores=2``) resumes from B alone and sends 200
   records that only B takes: none is acknowledged (one store of two ACKed), and g2 is
   killed (SIGKILL) with all of them unacknowledged;
3. B is paused, A resumed; run g3 resumes from A alone (at 1,000) and stores 300 records in
   A, acknowledged;
4. B is resumed: it holds g2's records at 1,000..1,199, where g3's were acknowledged;
5. a consumer that read all along got g2's records live from g2.

Before run epochs B kept g2's records (it held 1,000..1,199 already: duplicates to it) and
fetched only 1,200..1,299 from A, so the two stores held different records at 1,000..1,199
and a consumer reading B got g2's unacknowledged records where g3's acknowledged ones
belong. With them, B learns of g3's run (A's heads name it), sets g2's records aside (in its
quarantine, logged) and takes g3's: after repair both stores hold the same records, record
by record, and a consumer reads g1's and g3's records only; the consumer that read g2's
records live reads g3's again at those offsets (before, it dropped them as duplicates).
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from dafka.client import Consumer
from dafka.node import ConsumerConfig
from tests.integration.cluster.cluster_client import named_payload, tag_of, transport
from tests.integration.cluster.cluster_probe import HeadsProbe, read_log
from tests.integration.cluster.cluster_procs import DEADLINE, Proc, Processes
from tests.integration.cluster.test_cluster_named_restart import tower_on_port_pair

TOPIC = "run-epochs"
NAME = "w"
PARTITION = f"{NAME}.0"


@pytest.mark.timeout(240)
def test_an_older_runs_unacknowledged_records_are_replaced_on_the_store_that_took_them(
    procs: Processes, tmp_path: Path
) -> None:
    tower = tower_on_port_pair(procs)
    a = procs.store(tmp_path / "a", [tower], name="store-a")
    b = procs.store(tmp_path / "b", [tower], name="store-b")
    probe = HeadsProbe([tower.sub_endpoint])
    expected = [named_payload(s, "g1") for s in range(1_000)]
    expected += [named_payload(s, "g3") for s in range(1_000, 1_300)]

    def run(tag: str, records: int, *extra: str) -> Proc:
        return procs.produce_named([tower], TOPIC, NAME, tag, records, *extra)

    live = Consumer(
        TOPIC,
        transport=transport([tower.spec], 0.2),
        config=ConsumerConfig(offset_reset="earliest"),
    )
    seen: list[tuple[int, bytes]] = []
    try:
        first = run("g1", 1_000)
        assert first.wait_exit() == 0, procs.describe()
        for store in (a, b):
            probe.heads(store.reader_port, TOPIC, {PARTITION: 999})

        a.proc.send_signal(signal.SIGSTOP)
        second = run("g2", 200, "--min-stores", "2", "--flush-timeout", "120")
        assert second.wait_event("resumed")["start"] == 1_000
        heads = probe.heads(b.reader_port, TOPIC, {PARTITION: 1_199})
        assert heads.get(PARTITION) == 1_199, heads
        second.kill()  # SIGKILL: nothing of g2 acknowledged

        b.proc.send_signal(signal.SIGSTOP)
        a.proc.send_signal(signal.SIGCONT)
        third = run("g3", 300)
        assert third.wait_event("resumed")["start"] == 1_000
        assert third.wait_exit() == 0, procs.describe()
        done = third.require("done")
        assert done["flushed"], done
        assert done["acked"] == 300, done
        b.proc.send_signal(signal.SIGCONT)
        while not seen or seen[-1][0] < 1_299:  # the live consumer: every run's records
            batch = live.poll(timeout=DEADLINE, max_records=10_000)
            assert batch, f"the live consumer read {len(seen)} records, then nothing"
            seen += [(r.offset, r.value) for r in batch]

        for store in (a, b):
            heads = probe.heads(store.reader_port, TOPIC, {PARTITION: 1_299}, timeout=DEADLINE)
            assert heads.get(PARTITION) == 1_299, (store.data_dir.name, heads)

        with Consumer(
            TOPIC,
            transport=transport([tower.spec], 0.2),
            config=ConsumerConfig(offset_reset="earliest"),
        ) as consumer:
            got: list[tuple[int, bytes]] = []
            while len(got) < len(expected):
                batch = consumer.poll(timeout=DEADLINE, max_records=10_000)
                assert batch, f"the consumer read {len(got)} records, then nothing"
                got += [(r.offset, r.value) for r in batch]
        assert got == list(enumerate(expected)), "the consumer read another run's records"
    finally:
        probe.close()
        live.close()
    # It read g2's unacknowledged records live (g2 sent them), then g3's at those offsets:
    # every acknowledged record was delivered, and the last record delivered at each offset
    # is the acknowledged one (before, g3's 1,000..1,199 were dropped as duplicates).
    last_at = dict(seen)
    assert [last_at.get(s) for s in range(1_300)] == expected
    assert {tag_of(c) for _, c in seen[1_000:]} <= {"g2", "g3"}
    for store in (a, b):
        assert store.proc.stop() == 0, procs.describe()
    logs = [read_log(store.data_dir)[(TOPIC, PARTITION)] for store in (a, b)]
    for (sequence, held_a), (_, held_b) in zip(*logs, strict=True):
        assert held_a == held_b, (
            f"at {sequence} store A holds run {tag_of(held_a)}, B run {tag_of(held_b)}"
        )
    assert [content for _, content in logs[0]] == expected
    set_aside = list((b.data_dir / "log" / ".quarantine").rglob("*"))
    assert any(path.is_file() for path in set_aside), "g2's records were not kept aside"
    assert "were an older run's" in b.proc.stderr(), "the replacement was not logged"
