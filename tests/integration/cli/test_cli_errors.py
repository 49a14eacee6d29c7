"""One error path: ``Error: ...`` on stderr, exit 2 for usage, 1 at run time, no traceback."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dafka.server import free_port_pair
from tests.integration.cli.cli_run import dafka
from tests.integration.cluster.cluster_procs import Processes

USAGE = [
    (["produce", "t", "--tower", "bad"], "--tower"),
    (["produce", ""], "TOPIC"),
    (["produce", "x" * 300], "300 bytes"),
    (["consume", "t", "--beacon-interval", "0"], "--beacon-interval"),
    (["consume", "t", "--bind", "not an ip"], "--bind"),
    (["produce", "t", "--advertise", "my host"], "--advertise"),
    (["store", "--data", "README.md"], "not a directory"),
    (["up", "--stores", "-1"], "--stores"),
    (["up", "--port", "70000"], "--port"),
    (["store", "--data", "d", "--fsync", "ms:1e9"], "--fsync"),
    (["store", "--data", "d", "--fsync", "bad"], "--fsync"),
    (["consume", "t", "--count", "0"], "--count"),
    (["consume", "t", "-f", "%x"], "unknown field"),
    (["consume", "t", "--offset", "{bad"], "--offset"),
    (["tower", "--sub", "tcp://0.0.0.0:99999"], "--sub"),
    (["--config", "nope.toml", "config"], "not found"),
    (["pipeline", "--towers", "bogus"], "--towers"),
    (["pipeline", "--towers", "h:99999"], "out of range"),
    (["produce", "t", "--transaction-size", "10"], "--transaction-size needs --transactional-id"),
    (["produce", "t", "--transaction-size", "0"], "--transaction-size needs --transactional-id"),
    (["consume", "t", "-G", "g", "-o", '{"w.0": 3}'], "earliest or latest"),
    (["consume", "t", "--session-timeout", "4000"], "give -G GROUP"),
    (["consume", "t", "-G", "g", "--session-timeout", "4"], "for 4 s give 4000"),
    (["consume", "t", "-G", "g", "--session-timeout", "soon"], "--session-timeout"),
    (["consume", "t", "-G", "g", "--session-timeout", "0"], "--session-timeout"),
    (["consume", "t", "-G", "g", "--heartbeat-interval", "-1"], "--heartbeat-interval"),
    (["consume", "t", "-G", "g", "--session-timeout", "nan"], "'--session-timeout': nan is"),
    (["consume", "t", "-G", "g", "--session-timeout", "1e400"], "'--session-timeout': 1e400 is"),
    (["consume", "t", "-G", "g", "--heartbeat-interval", "nan"], "'--heartbeat-interval': nan"),
    (["consume", "t", "-G", "g", "--heartbeat-interval", "0.5"], "for 0.5 s give 500"),
    (
        ["consume", "t", "-G", "g", "--session-timeout", "4000", "--heartbeat-interval", "4000"],
        "heartbeat_interval_ms (4000) must be below session_timeout_ms (4000)",
    ),
    (
        ["consume", "t", "-G", "g", "--beacon-interval", "0.2", "--heartbeat-interval", "500"],
        "session_timeout_ms (400: 2 beacon intervals)",
    ),
    (["topics", "delete", "__dafka_offsets", "--yes"], "internal topic"),
    (["topics", "delete", "__dafka_deletes", "--yes"], "internal topic"),
]


@pytest.mark.parametrize(("args", "named"), USAGE, ids=[" ".join(a)[:40] for a, _ in USAGE])
def test_usage_errors_exit_2_with_one_line(args: list[str], named: str) -> None:
    result = dafka(*args, timeout=30)
    assert result.code == 2, result.err
    assert "Error:" in result.err
    assert named in result.err
    assert "Traceback" not in result.err
    assert result.out == b""


def test_bad_environment_and_config_values_name_the_key(tmp_path: Path) -> None:
    result = dafka("config", env={"DAFKA_BEACON_INTERVAL": "-1"})
    assert result.code == 2
    assert "DAFKA_BEACON_INTERVAL" in result.err
    assert "beacon/interval" in result.err
    config = tmp_path / "c.toml"
    config.write_text("[store]\nfsink = 'batch'\n")
    result = dafka("--config", str(config), "config")
    assert result.code == 2
    assert "unknown key 'store/fsink'" in result.err
    assert "store/fsync" in result.err
    assert "Traceback" not in result.err


def test_no_tower_reachable_is_a_runtime_error() -> None:
    port = free_port_pair()
    result = dafka("consume", "t", "--tower", f"127.0.0.1:{port}", timeout=60)
    assert result.code == 1
    assert "Error:" in result.err
    assert "no welcome from any tower" in result.err
    assert "Traceback" not in result.err


@pytest.fixture
def lone_tower(procs: Processes) -> str:
    """A tower with no store, ready (its ready line read): its ``--tower`` spec. A tower
    started on a fixed port pair and not waited for could lose the pair to another process
    or start late on a busy machine: the producer then met no tower at all."""
    return procs.tower().spec


def test_produce_without_a_store_says_so_and_exits_1_with_the_count(lone_tower: str) -> None:
    tower = lone_tower
    started = time.monotonic()
    result = dafka(
        "produce",
        "t",
        "--tower",
        tower,
        "--flush-timeout",
        "3",
        stdin=b"".join(b"%d\n" % i for i in range(1000)),
    )
    elapsed = time.monotonic() - started
    assert result.code == 1
    assert "waiting for a store" in result.err
    assert "Error: 1000 of 1000 messages were not stored within 3s" in result.err
    assert "Traceback" not in result.err
    assert elapsed < 30


def test_produce_honours_the_flush_timeout_when_sending_blocks(lone_tower: str) -> None:
    """More input than the in-flight bound with no store: it stops reading after the timeout."""
    tower = lone_tower
    result = dafka(
        "produce",
        "t",
        "--tower",
        tower,
        "--flush-timeout",
        "2",
        "--max-in-flight",
        "1000",
        stdin=b"x\n" * 5000,
    )
    assert result.code == 1
    assert "Error: 1000 of 1000 messages were not stored within 2s" in result.err
    assert "stopped reading input" in result.err
    assert "Traceback" not in result.err


def test_a_from_timestamp_in_seconds_is_pointed_out() -> None:
    """``--from-timestamp`` takes ms; ``$(date +%s)`` (seconds) is 1970 in ms and read
    everything without a word."""
    port = free_port_pair()  # nobody there: the warning comes before joining
    result = dafka("consume", "t", "--from-timestamp", "1700000000", "--tower", f"127.0.0.1:{port}")
    assert "Warning: --from-timestamp 1700000000 is ms since the epoch (1970-01-20" in result.err
    assert "pass 1700000000000" in result.err
    assert "Traceback" not in result.err
    quiet = dafka(
        "consume", "t", "--from-timestamp", "1700000000000", "--tower", f"127.0.0.1:{port}"
    )
    assert "Warning" not in quiet.err
