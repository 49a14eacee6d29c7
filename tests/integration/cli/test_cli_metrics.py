"""Daemons serve /metrics (Prometheus text) and /healthz with --metrics-port."""

from __future__ import annotations

import re
import signal
import urllib.error
import urllib.request
from pathlib import Path

from dafka.server import free_port_pair
from tests.integration.cli.cli_run import dafka
from tests.integration.cluster.cluster_procs import DAFKA, Processes, wait_until

_READY = re.compile(r"metrics on http://127.0.0.1:(\d+)/metrics")


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _value(text: str, name: str) -> float:
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    assert found is not None, f"{name} not in\n{text}"
    return float(found.group(1))


def test_store_and_tower_metrics_and_health(procs: Processes, tmp_path: Path) -> None:
    port, tower_metrics, store_metrics = free_port_pair(), free_port_pair(), free_port_pair()
    tower = procs.spawn(
        "tower",
        [
            *DAFKA,
            "tower",
            "--sub",
            f"tcp://127.0.0.1:{port}",
            "--pub",
            f"tcp://127.0.0.1:{port + 1}",
            "--metrics-port",
            str(tower_metrics),
        ],
    )
    tower.wait_log(_READY)
    store = procs.spawn(
        "store",
        [
            *DAFKA,
            "store",
            "--data",
            str(tmp_path / "s"),
            "--tower",
            f"127.0.0.1:{port}",
            "--beacon-interval",
            "0.2",
            "--metrics-port",
            str(store_metrics),
            "--fsync",
            "batch",
        ],
    )
    store.wait_log(_READY)
    assert _get(store_metrics, "/healthz") == (200, "ok\n")
    produced = dafka(
        "produce",
        "m",
        "--tower",
        f"127.0.0.1:{port}",
        "--beacon-interval",
        "0.2",
        "--no-batching",
        stdin=b"".join(b"%d\n" % i for i in range(50)),
    )
    assert produced.code == 0, produced.err
    status, text = _get(store_metrics, "/metrics")
    assert status == 200
    assert _value(text, "dafka_store_stored_total") == 50
    assert _value(text, "dafka_store_acks_sent_total") >= 1
    assert _value(text, "dafka_store_partitions") == 1
    assert _value(text, "dafka_store_data_bytes") > 50
    assert _value(text, "dafka_store_undecodable_total") == 0
    # fsync=batch: one append (with its fsync) per drained batch, each made durable, ACKed
    appends = _value(text, "dafka_store_append_seconds_count")
    assert 1 <= appends <= 50
    assert _value(text, 'dafka_store_append_seconds_bucket{le="+Inf"}') == appends
    assert _value(text, "dafka_store_append_seconds_sum") > 0
    assert 1 <= _value(text, "dafka_store_durable_seconds_count") <= appends
    _, tower_text = _get(tower_metrics, "/metrics")
    assert _value(tower_text, "dafka_tower_beacons_forwarded_total") > 0
    assert _get(store_metrics, "/nope")[0] == 404
    assert store.stop() == 0
    wait_until(lambda: not store.running(), "store stopped")


def _scrape(port: int) -> str | None:
    try:
        status, text = _get(port, "/metrics")
    except OSError:  # not listening yet
        return None
    return text if status == 200 else None


def test_produce_and_consume_serve_client_metrics(procs: Processes, tmp_path: Path) -> None:
    from dafka.server import LocalCluster

    with LocalCluster(tmp_path / "data", stores=1, beacon_interval=0.2) as cluster:
        node = ["--tower", cluster.towers, "--beacon-interval", "0.2"]
        produce_port, consume_port = free_port_pair(), free_port_pair()
        producer = procs.spawn(
            "produce",
            [*DAFKA, "produce", "cm", *node, "--no-batching", "--metrics-port", str(produce_port)],
            stdin=True,
        )
        for i in range(40):
            producer.send_line(f"v{i:02d}")  # 3 bytes each

        def produced() -> str | None:
            text = _scrape(produce_port)
            if text is None or "dafka_producer_messages_delivered_total 40.0" not in text:
                return None
            return text

        text = wait_until(produced, "the producer's metrics: 40 delivered")
        assert _value(text, "dafka_producer_bytes_delivered_total") == 120
        assert _value(text, "dafka_producer_ack_latency_seconds_count") == 40
        assert _value(text, "dafka_producer_in_flight") == 0
        assert _value(text, 'dafka_producer_dropped_total{reason="undecodable"}') == 0

        consumer = procs.spawn(
            "consume",
            [*DAFKA, "consume", "cm", *node, "-o", "earliest", "--metrics-port", str(consume_port)],
        )

        def consumed() -> str | None:
            text = _scrape(consume_port)
            if text is None or "dafka_consumer_messages_polled_total 40.0" not in text:
                return None
            return text

        text = wait_until(consumed, "the consumer's metrics: 40 polled")
        assert _value(text, "dafka_consumer_bytes_received_total") == 120
        assert _value(text, "dafka_consumer_lag") == 0
        assert consumer.out_path.read_text().splitlines() == [f"v{i:02d}" for i in range(40)]
        assert consumer.stop(signal.SIGINT) == 0
        producer.popen.stdin.close()  # type: ignore[union-attr]
        assert producer.wait_exit() == 0
