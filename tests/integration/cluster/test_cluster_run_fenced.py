"""Two live producers of one name on real sockets: the older run is fenced, never told its
records were stored (docs/guarantees.md, "A fenced producer").

A zombie run stores five records; a successor of the same name resumes after them (a newer
run, whose HEAD makes the store fence the zombie's records from its start) and keeps
storing. The store's ACKs reach both (one ``K`` + id prefix); they name the successor's run,
so the zombie fails its records with ``RunFencedError`` instead of reporting them stored.
Before, the zombie reported all of them stored (20 of 20 late records in a probe of this
scenario) though the store had refused every one.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from pathlib import Path

import pytest

from dafka import LocalCluster, Producer, RecordMetadata, RunFencedError

TOPIC = "run-fenced"


@pytest.mark.timeout(120)
def test_a_zombie_run_is_fenced_and_reports_none_of_its_late_records_stored(
    tmp_path: Path,
) -> None:
    with LocalCluster(tmp_path, stores=1, beacon_interval=0.2) as cluster:
        common = {"towers": cluster.towers, "beacon_interval": 0.2, "batching": False}
        zombie = Producer(TOPIC, name="z", **common)  # type: ignore[arg-type]
        try:
            for i in range(5):
                zombie.send(b"old-%d" % i)
            assert zombie.flush(30) == 0
            with Producer(TOPIC, name="z", **common) as successor:  # type: ignore[arg-type]
                late: list[Future[RecordMetadata]] = []
                deadline = time.monotonic() + 60
                while True:
                    try:
                        late.append(zombie.send(b"late"))
                    except RunFencedError as fenced:
                        error = fenced
                        break
                    successor.send(b"new")
                    assert successor.flush(30) == 0
                    assert time.monotonic() < deadline, "the zombie was never fenced"
                assert successor.flush(30) == 0
            assert "was fenced: a newer run (epoch" in str(error)
            for future in late:  # none of the zombie's late records is reported stored
                assert isinstance(future.exception(30), RunFencedError)
            with pytest.raises(RunFencedError):
                zombie.flush(30)
        finally:
            zombie.close(timeout=0)


@pytest.mark.timeout(120)
def test_a_zombie_whose_successor_writes_nothing_is_fenced_by_its_own_heads(
    tmp_path: Path,
) -> None:
    # The successor resumes and writes nothing, so no ACK of its records can fence the
    # zombie, and the zombie's own late records may never reach the store: the two runs
    # share their node ids, and the store's SUB follows the endpoint whose beacon came last.
    # The zombie's HEADs do reach it (every head interval), and the store answers an older
    # run's HEAD past a newer run's start with the ACK naming that run. Before, HEADs were
    # refused silently and the zombie's late record failed only at its delivery timeout,
    # with a plain DeliveryError
    with LocalCluster(tmp_path, stores=1, beacon_interval=0.2) as cluster:
        common = {"towers": cluster.towers, "beacon_interval": 0.2, "batching": False}
        zombie = Producer(TOPIC, name="y", delivery_timeout=60.0, **common)  # type: ignore[arg-type]
        try:
            for i in range(3):
                zombie.send(b"old-%d" % i)
            assert zombie.flush(30) == 0
            with Producer(TOPIC, name="y", **common):  # type: ignore[arg-type]
                late = zombie.send(b"late")
                error = late.exception(40)  # well within the zombie's delivery timeout
                assert isinstance(error, RunFencedError), repr(error)
                with pytest.raises(RunFencedError):
                    zombie.flush(30)
        finally:
            zombie.close(timeout=0)
