"""``dafka produce --acks-from`` (``producer/acks_from``): pointing the command at C stores.

A C store ACKs without ever introducing itself (no STORE-HELLO naming its writer), so with
the default ``stores`` the command counts none of its ACKs. The C store here is a peer of
real sockets that beacons through a real tower and ACKs whatever partition subscribes to
it, as a C store does, without greeting: ``--acks-from any`` makes ``dafka produce`` exit 0
on its ACKs, the default exits 1 with every message unstored.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dafka.protocol import Ack
from dafka.server import InProcessCluster, free_port_pair
from tests.integration.cli.cli_run import dafka
from tests.integration.cluster.cluster_procs import DAFKA
from tests.integration.hardening.test_forged_ack import Forger

TOPIC = "c-stored"
LINES = 3
DEADLINE = 60.0


def test_config_shows_the_key_and_its_variable() -> None:
    shown = dafka("config", env={"DAFKA_PRODUCER_ACKS_FROM": "any"})
    assert shown.code == 0, shown.err
    (line,) = [x for x in shown.out.decode().splitlines() if x.startswith("producer/acks_from")]
    # key, value, where it came from, its variable
    assert line.split() == [
        "producer/acks_from",
        "any",
        "env",
        "DAFKA_PRODUCER_ACKS_FROM",
        "DAFKA_PRODUCER_ACKS_FROM",
    ]


def test_a_bad_value_is_a_usage_error_naming_the_choices() -> None:
    result = dafka("produce", "t", "--acks-from", "bogus", timeout=30)
    assert result.code == 2, result.err
    assert "Error: Invalid value for '--acks-from'" in result.err
    assert "one of stores, any, got 'bogus'" in result.err
    assert "Traceback" not in result.err
    assert result.out == b""


@pytest.fixture
def c_store(tmp_path: Path) -> Iterator[tuple[str, Forger]]:
    """A tower, no store of ours, and a C-like store: ``(towers, the store)``."""
    port = free_port_pair()
    with InProcessCluster(f"{tmp_path}/data", stores=0, tower_port=port) as cluster:
        store = Forger(cluster.tower.sub_endpoint)
        try:
            yield f"127.0.0.1:{port}", store
        finally:
            store.close()


def _produce(towers: str, store: Forger, tmp_path: Path, *extra: str) -> tuple[int, str]:
    """``dafka produce`` of LINES messages while ``store`` ACKs the last one of every
    partition that subscribed to it (never greeting): ``(exit code, stderr)``."""
    err = tmp_path / "produce.err"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("DAFKA_")}
    with err.open("wb") as err_file:
        proc = subprocess.Popen(
            [
                *DAFKA,
                "produce",
                TOPIC,
                "--tower",
                towers,
                "--beacon-interval",
                "0.2",
                "--bind",
                "127.0.0.1",
                "--advertise",
                "127.0.0.1",
                "--no-batching",
                *extra,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=err_file,
            env=environ,
        )
        try:
            assert proc.stdin is not None
            proc.stdin.write(b"".join(b"m%d\n" % i for i in range(LINES)))
            proc.stdin.close()
            deadline = time.monotonic() + DEADLINE
            while proc.poll() is None and time.monotonic() < deadline:
                store.pump(b"", [])  # beacon, read subscriptions
                for sub in list(store.subscribed):
                    if sub.startswith(b"K"):  # a producer's partition wants its ACKs
                        store.pump(sub, [Ack(sub[1:].decode(), TOPIC, LINES - 1)])
                time.sleep(0.05)
        finally:
            if proc.poll() is None:
                proc.kill()
            code = proc.wait(15)
    return code, err.read_text(errors="replace")


def test_acks_from_any_counts_a_c_stores_acks(c_store: tuple[str, Forger], tmp_path: Path) -> None:
    towers, store = c_store
    code, err = _produce(towers, store, tmp_path, "--acks-from", "any", "--flush-timeout", "30")
    assert code == 0, err
    assert "Traceback" not in err
    # the default counts none of them: the same run waits out its timeout, nothing stored
    code, err = _produce(towers, store, tmp_path, "--flush-timeout", "3")
    assert code == 1, err
    assert f"Error: {LINES} of {LINES} messages were not stored within 3s" in err
    assert store.sent > 0  # it did ACK: the refusal is the setting's
