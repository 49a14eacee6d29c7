"""Issue 18 path 4: a running store finds damage that no read met (its background scrub) and
repairs it from a peer; ``/metrics`` shows the scrub's progress and what it found.

Two ``dafka store`` processes hold the same 20,000 records; 3 bytes of one record are flipped
in store 0's segment *while it runs* (nobody reads the partition). Its scrub (``--scrub-rate``,
fast here) meets the damage, logs it, keeps the records after it, and the hole is filled from
store 1 - without a restart and without any reader. Before, the damage stayed latent until a
read met it (and then cost every record after it).
"""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import pytest

from dafka.server import free_port_pair
from tests.integration.cluster.cluster_probe import HeadsProbe, check_partition, read_log
from tests.integration.cluster.cluster_procs import Processes, wait_until

_SCRUB_DAMAGE = re.compile(
    r"scrub: partition '\S+'/'(\S+)' damaged \(corrupt: [^)]*\) .*offsets (\d+)\.\.(\d+) "
)
_FILLED = re.compile(r"records (\d+)\.\.(\d+) filled from a peer")


def _metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        return str(reply.read().decode())


def _value(text: str, name: str) -> float:
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    assert found is not None, f"{name} not in\n{text}"
    return float(found.group(1))


def test_the_scrub_finds_a_flip_in_a_running_store_and_repairs_it_from_a_peer(
    procs: Processes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    records, victim = 20_000, 12_345
    tower = procs.tower()
    port = free_port_pair()
    monkeypatch.setenv("DAFKA_STORE_SCRUB_RATE", "4M")
    monkeypatch.setenv("DAFKA_METRICS_PORT", str(port))
    scrubbed = procs.store(tmp_path / "store-0", [tower], fsync="ms:5")
    monkeypatch.setenv("DAFKA_STORE_SCRUB_RATE", "0")  # the peer does not scrub
    monkeypatch.delenv("DAFKA_METRICS_PORT")
    peer = procs.store(tmp_path / "store-1", [tower], fsync="ms:5")
    producer = procs.client("producer", "produce", [tower], "scrub", "--records", str(records))
    assert producer.wait_event("done", timeout=120)["flushed"] is True
    partition = producer.require("ready")["id"]
    probe = HeadsProbe([tower.sub_endpoint])
    try:
        for store in (scrubbed, peer):
            heads = probe.heads(store.reader_port, "scrub", {partition: records - 1}, 90)
            assert heads == {partition: records - 1}
    finally:
        probe.close()
    (segment,) = sorted((scrubbed.data_dir / "log").glob("*/*/*.log"))
    with segment.open("r+b") as f:  # under the running store: 3 bytes of record 12,345
        f.seek(24 + victim * 116 + 16 + 50)
        data = f.read(3)
        f.seek(24 + victim * 116 + 16 + 50)
        f.write(bytes(b ^ 0x5A for b in data))

    found = scrubbed.proc.wait_log(_SCRUB_DAMAGE, timeout=90)
    assert (found.group(1), int(found.group(2)), int(found.group(3))) == (
        partition,
        victim,
        victim,
    )
    filled = scrubbed.proc.wait_log(_FILLED, timeout=90)
    assert (int(filled.group(1)), int(filled.group(2))) == (victim, victim)

    passes = _value(_metrics(port), "dafka_store_scrub_passes_total")

    def a_whole_pass_after_the_repair() -> str | None:
        text = _metrics(port)
        return text if _value(text, "dafka_store_scrub_passes_total") >= passes + 2 else None

    text = wait_until(a_whole_pass_after_the_repair, "a whole scrub pass", timeout=90)
    assert _value(text, "dafka_store_scrub_bytes_per_s") == 4 * 1024 * 1024
    assert _value(text, "dafka_store_scrub_bytes_checked_total") >= (records - 1) * 116
    # the last whole pass read again what the one before it checked, found unchanged
    assert _value(text, "dafka_store_scrub_bytes_unchanged_total") > 0
    assert _value(text, "dafka_store_scrub_damage_total") == 1
    assert _value(text, "dafka_store_scrub_records_lost_total") == 1
    assert 0 <= _value(text, "dafka_store_scrub_pass_progress") <= 1
    assert _value(text, "dafka_store_holes") == 0
    assert _value(text, "dafka_store_records_filled_total") == 1
    assert "Traceback" not in scrubbed.proc.stderr()
    assert scrubbed.proc.stop() == 0
    assert peer.proc.stop() == 0
    (held,) = read_log(scrubbed.data_dir).values()
    check_partition(held, records)
    quarantine = list((scrubbed.data_dir / "log" / ".quarantine").glob("*/*/*"))
    assert [q.stat().st_size for q in quarantine] == [116]
