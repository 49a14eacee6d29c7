"""One tower grammar for every command and client: ``HOST:PORT`` (beacons out on PORT+1) or
``HOST:SUBPORT:PUBPORT``, with any pair of ports.

A tower whose ports are not consecutive is reached by a store, ``dafka produce`` (batched
and transactional), ``dafka consume`` (both isolation levels) and ``dafka status`` given the
same ``--tower`` value.
"""

from __future__ import annotations

import json
from pathlib import Path

from dafka.server import free_port_pair
from tests.integration.cli.cli_run import dafka
from tests.integration.cluster.cluster_procs import (
    _TOWER_READY,
    BEACON_INTERVAL,
    DAFKA,
    Processes,
    TowerProc,
)


def _apart_ports() -> tuple[int, int]:
    """Two free ports that are not consecutive."""
    sub = free_port_pair()
    pub = free_port_pair()
    while pub in (sub, sub + 1):
        pub = free_port_pair()
    return sub, pub


def test_every_command_takes_a_tower_as_host_subport_pubport(
    procs: Processes, tmp_path: Path
) -> None:
    for attempt in range(3):  # ports free when picked, taken before the bind: pick again
        sub, pub = _apart_ports()
        argv = ["--sub", f"tcp://127.0.0.1:{sub}", "--pub", f"tcp://127.0.0.1:{pub}"]
        proc = procs.spawn(f"tower-{attempt}", [*DAFKA, "tower", *argv])
        try:
            proc.wait_log(_TOWER_READY)
            break
        except AssertionError:
            if "Address already in use" not in proc.stderr() or attempt == 2:
                raise
    tower = TowerProc(proc, f"tcp://127.0.0.1:{sub}", f"tcp://127.0.0.1:{pub}")
    spec = f"127.0.0.1:{sub}:{pub}"
    assert tower.spec == spec
    procs.store(tmp_path / "s", [tower])
    join = ["--tower", spec, "--beacon-interval", BEACON_INTERVAL]

    produced = dafka("produce", "plain", *join, stdin=b"".join(b"%d\n" % i for i in range(10)))
    assert produced.code == 0, produced.err
    produced = dafka(
        "produce",
        "txn",
        *join,
        "--transactional-id",
        "w",
        "--transaction-size",
        "5",
        stdin=b"".join(b"%d\n" % i for i in range(10)),
    )
    assert produced.code == 0, produced.err

    read = dafka("consume", "plain", *join, "-o", "earliest", "-c", "10")
    assert read.code == 0, read.err
    assert read.out.split() == [b"%d" % i for i in range(10)]
    read = dafka(
        "consume", "txn", *join, "-o", "earliest", "--isolation", "read_committed", "-c", "10"
    )
    assert read.code == 0, read.err
    assert read.out.split() == [b"%d" % i for i in range(10)]

    shown = dafka("status", *join, "--json", "--wait", "5")
    assert shown.code == 0, shown.err
    assert json.loads(shown.out)["towers"] == [spec]


def test_a_bad_tower_names_the_value_as_typed() -> None:
    result = dafka("produce", "t", "--tower", "127.0.0.1:5556:x")
    assert result.code == 2
    assert "'127.0.0.1:5556:x'" in result.err
    assert "/tcp://" not in result.err
