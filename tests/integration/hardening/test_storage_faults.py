"""Issue 8 item 3: storage faults heal without a restart, and nothing is silent (processes).

* A store whose disk fills up (a real 2 MB tmpfs) logs it once, ACKs nothing it could not
  write, and - once space is freed - writes and ACKs everything by itself: the producer
  held every unACKed record meanwhile, the log ends complete.
* A store whose segment has a 3-byte flip in the middle finds it at read time: it logs the
  damage at WARNING, keeps the records after the damaged one (a hole of exactly one record),
  and fills the hole from a healthy peer store; the consumer gets every record.
* The same flip on a store that holds the only copy (issue 18 path 4): ``dafka consume -e``
  prints every record before the damaged one, then one ``Error:`` line naming it, and exits
  1; with ``--fail-on-data-loss false`` it prints every other record and exits 0. Before,
  the store cut the 10,000 intact records after it and both waited forever.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.integration.cluster.cluster_client import payload
from tests.integration.cluster.cluster_probe import HeadsProbe, check_partition, read_log
from tests.integration.cluster.cluster_procs import DAFKA, Proc, Processes, wait_until
from tests.integration.storage.tmpfs import fill

_DISK_FULL = re.compile(r"disk full \(ENOSPC\) in (\S+) \((\d+) bytes free\)")
_RESUMED = re.compile(r"writes to (\S+) resume after (\d+) failed append")
_READ_DAMAGE = re.compile(
    r"read: partition '(\S+)'/'(\S+)' damaged \(corrupt: [^)]*\) .*offsets (\d+)\.\.(\d+) "
)
_FILLED = re.compile(r"records (\d+)\.\.(\d+) filled from a peer")


def test_a_store_on_a_full_disk_heals_when_space_is_freed(
    procs: Processes, small_disk: Path
) -> None:
    records, before = 5000, 2000
    tower = procs.tower()
    store = procs.store(small_disk / "store", [tower], fsync="ms:5")
    producer = procs.client(
        "producer",
        "produce",
        [tower],
        "full",
        "--records",
        str(records),
        "--pause-at",
        str(before),
        "--flush-timeout",
        "120",
        "--report",
        "0.1",
    )
    producer.wait_event("paused")
    producer.wait_event("progress", lambda e: e["acked"] == before)
    filler = fill(small_disk)
    producer.send_line("go")
    full = store.proc.wait_log(_DISK_FULL)
    assert full.group(1) == str(small_disk / "store" / "log")
    producer.wait_event("published")

    # The disk is still full: nothing past what the store could write is ACKed, and the
    # producer keeps the rest (it has not finished its flush).
    def held_back() -> int | None:
        """The acked count once 10 reports in a row (a second) showed it unchanged."""
        seen = [e for e in producer.events() if e["event"] == "progress"]
        last = [e["acked"] for e in seen if e["published"] == records][-10:]
        return last[0] if len(last) == 10 and len(set(last)) == 1 else None

    # (a few records may still fit in the last, partly used page of the segment file)
    stalled = wait_until(held_back, "ACKs to stop while the disk is full")
    assert stalled < records
    assert producer.running()
    filler.unlink()
    done = producer.wait_event("done", timeout=120)
    assert done["flushed"] is True
    assert done["acked"] == records
    assert producer.wait_exit() == 0
    store.proc.wait_log(_RESUMED)
    log = store.proc.stderr()
    full_lines, resumed = _DISK_FULL.findall(log), _RESUMED.findall(log)
    # Each run of failures is logged when it starts and when it ends, not per failed
    # append: the appends retried with backoff while the disk was full outnumber the lines.
    assert len(full_lines) == len(resumed) >= 1
    assert sum(int(failed) for _, failed in resumed) > len(full_lines)
    assert "GapAppendError" not in log
    assert store.proc.stop() == 0
    (held,) = read_log(store.data_dir).values()
    check_partition(held, records)


def _segment(data_dir: Path) -> Path:
    (segment,) = sorted((data_dir / "log").glob("*/*/*.log"))
    return segment


def test_corruption_found_at_read_time_is_refetched_from_a_peer_store(
    procs: Processes, tmp_path: Path
) -> None:
    records, victim = 200_000, 100_000
    tower = procs.tower()
    stores = [procs.store(tmp_path / f"store-{i}", [tower], fsync="ms:5") for i in range(2)]
    producer = procs.client(
        "producer", "produce", [tower], "flip", "--records", str(records), "--report", "1"
    )
    done = producer.wait_event("done", timeout=120)
    assert done["flushed"] is True
    partition = producer.require("ready")["id"]
    probe = HeadsProbe([tower.sub_endpoint])
    try:
        for store in stores:
            heads = probe.heads(store.reader_port, "flip", {partition: records - 1}, 90)
            assert heads == {partition: records - 1}
        for store in stores:
            assert store.proc.stop() == 0
        # 3 bytes flipped inside record 100,000's payload (records are 116 bytes on disk)
        segment = _segment(stores[0].data_dir)
        data = bytearray(segment.read_bytes())
        at = 24 + victim * 116 + 16 + 40
        data[at : at + 3] = bytes(b ^ 0x5A for b in data[at : at + 3])
        segment.write_bytes(bytes(data))

        # alone at first, and without its scrub: at load ~30 the scrub (1 MiB/s) reached the
        # damaged record 13 s after the start, before the consumer's reads did, and took it
        # away from the read path this test is about (test_storage_scrub.py has the scrub's)
        damaged = procs.store(
            stores[0].data_dir, [tower], fsync="ms:5", extra=("--scrub-rate", "0")
        )
        consumer = procs.client(
            "consumer", "consume", [tower], "flip", "--expect", str(records), "--timeout", "150"
        )
        found = damaged.proc.wait_log(_READ_DAMAGE, timeout=90)
        assert (found.group(2), int(found.group(3)), int(found.group(4))) == (
            partition,
            victim,
            victim,
        )
        # it still holds (and announces) everything after the damaged record
        heads = probe.heads(damaged.reader_port, "flip", {partition: records - 1}, 30)
        assert heads == {partition: records - 1}
        healthy = procs.store(stores[1].data_dir, [tower], fsync="ms:5")
        filled = damaged.proc.wait_log(_FILLED, timeout=90)  # from the peer, no restart
        assert (int(filled.group(1)), int(filled.group(2))) == (victim, victim)
        finished = consumer.wait_event("done", timeout=150)
        assert (finished["received"], finished["error_list"]) == (records, [])
        assert consumer.wait_exit() == 0
    finally:
        probe.close()
    assert damaged.proc.stop() == 0
    assert healthy.proc.stop() == 0
    quarantine = list((stores[0].data_dir / "log" / ".quarantine").glob("*/*/*"))
    assert len(quarantine) == 1
    assert quarantine[0].stat().st_size == 116  # exactly the damaged record
    (held,) = read_log(stores[0].data_dir).values()
    check_partition(held, records)


def test_a_flip_in_the_only_copy_costs_one_record_and_consume_says_so(
    procs: Processes, tmp_path: Path
) -> None:
    records, victim = 20_001, 10_000
    tower = procs.tower()
    store = procs.store(tmp_path / "store", [tower], fsync="ms:5")
    producer = procs.client("producer", "produce", [tower], "flip", "--records", str(records))
    assert producer.wait_event("done", timeout=120)["flushed"] is True
    assert producer.wait_exit() == 0
    assert store.proc.stop() == 0
    segment = _segment(store.data_dir)
    data = bytearray(segment.read_bytes())
    at = 24 + victim * 116 + 16 + 40  # 3 bytes inside record 10,000's payload
    data[at : at + 3] = bytes(b ^ 0x5A for b in data[at : at + 3])
    segment.write_bytes(bytes(data))
    procs.store(store.data_dir, [tower], fsync="ms:5")

    failing = _start(procs, tower.spec, "flip", "--earliest", "-e")
    skipping = _start(procs, tower.spec, "flip", "--earliest", "-e", "--fail-on-data-loss", "false")
    code, lines, err = _finish(failing)
    assert lines == [payload(s) for s in range(victim)]  # everything before it, in order
    errors = [line for line in err.splitlines() if line.startswith("Error:")]
    assert errors == [
        f"Error: flip/{producer.require('ready')['id']}: records {victim}..{victim} are gone "
        "from every store (1 record); --fail-on-data-loss false skips them"
    ]
    assert "Traceback" not in err
    assert code == 1
    code, lines, err = _finish(skipping)
    assert lines == [payload(s) for s in range(records) if s != victim]
    assert f"records {victim}..{victim}: gone from every store" in err
    assert code == 0


def _start(procs: Processes, towers: str, *args: str) -> Proc:
    argv = [*DAFKA, "consume", *args, "--tower", towers, "--advertise", "127.0.0.1"]
    return procs.spawn("consume", [*argv, "--bind", "127.0.0.1", "--beacon-interval", "0.2"])


def _finish(proc: Proc) -> tuple[int, list[bytes], str]:
    """Exit code, stdout lines and stderr of a ``dafka consume`` (at most 3 minutes: ten
    FETCH retries refused take ~37 s with the default timings)."""
    code = proc.wait_exit(180)
    return code, proc.out_path.read_bytes().splitlines(), proc.stderr()
