"""A Spark chaos soak of the exactly-once dafka sink: kill the driver, reset its checkpoint,
fail tasks and kill a store, and check that nothing is lost.

    nice -n 10 .venv/bin/python scripts/spark_chaos.py [--minutes 10] [--seed 1]

A tower and two ``dafka store`` processes; two named producers (in this process) publish
``--rate`` records/s each to the topic ``sc-in`` (partitions ``sc-a.0`` and ``sc-b.0``, one
RECORD per value, values ``b"a:<offset>"``); a Spark driver process (``local[2,4]``: task
retries) streams ``sc-in`` through ``repartition(3)`` into the dafka sink (topic ``sc-out``)
with a checkpoint; every run of it fails the first attempt of task 0 of a few micro-batches
after 5 rows (``dafka.testing.fail_sink_task`` on the writer of ``tests/spark/faults.py``'s
sink: the failed attempt's rows stay behind, uncommitted).
Until the time is up, every 15-45 s of a running query one of:

* **kill**: SIGKILL the driver (JVM and Python workers) and start it again on the same
  checkpoint - the same query: exactly once, no duplicate allowed;
* **reset**: SIGKILL the driver, delete its checkpoint and start a fresh one at the same
  path (a new query, issue 18) with ``startingOffsets`` at the old checkpoint's last
  committed offsets minus a random rewind of 0-150 records per partition. The new query
  writes what it reads again: duplicates by design, allowed only for offsets in
  ``[start, the old checkpoint's last planned end)``; they are counted apart from loss;
* **store**: SIGKILL one store and restart it on its data directory after 1-3 s.

At the end the producers stop (every record ACKed), the last driver is killed and one more
run on its checkpoint with ``availableNow`` reads to the heads; a read-committed consumer
reads ``sc-out``. Prints records, faults, lost, duplicated (expected by the resets, and
unexpected); exit 1 if anything was lost, duplicated outside a reset's window, or a run
failed.

``spark_chaos.py drive TOWERS CHECKPOINT STARTING TRIGGER FAIL`` is the driver process itself
(``FAIL``: the micro-batches whose task 0 fails once, comma-separated, or empty).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.integration.cluster.cluster_procs import (  # noqa: E402
    _TOWER_READY,
    DAFKA,
    Processes,
    TowerProc,
)
from tests.spark.committed import committed_values, read_to_heads  # noqa: E402

from dafka import Producer  # noqa: E402
from dafka.message import Flags, get_clock, get_flags  # noqa: E402
from dafka.server import free_port_pair  # noqa: E402

IN_TOPIC = "sc-in"
OUT_TOPIC = "sc-out"
PARTITIONS = ("sc-a", "sc-b")
CONNECT_BACK = "failed to connect back"
Offsets = dict[str, int]
"""partition -> next offset, of the one input topic."""


# -- the driver process ----------------------------------------------------------------------


def drive(towers: str, checkpoint: str, starting: str, trigger: str, fail: str) -> None:
    """``sc-in`` -> ``repartition(3)`` -> the dafka sink ``sc-out``; ``batch N`` per batch."""
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    from tests.spark.faults import register_faulty_sink

    from dafka.testing import fail_sink_task

    spark = (
        SparkSession.builder.master("local[2,4]")
        .appName("dafka-spark-chaos")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "3")
        .config("spark.driver.memory", "768m")
        .config("spark.python.authenticate.socketTimeout", "120s")
        .config("spark.network.timeout", "300s")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    sink = "dafka"
    if fail:
        sink = register_faulty_sink(spark, fail_sink_task(map(int, fail.split(",")), rows=5))
    reader = (
        spark.readStream.format("dafka")
        .option("towers", towers)
        .option("subscribe", IN_TOPIC)
        .option("startingOffsets", starting)
    )
    if trigger != "drain":  # bounded batches, large enough to keep up on a loaded machine
        reader = reader.option("maxRecordsPerTrigger", "20000")
    source = reader.load()
    out = source.select("value").repartition(3)
    last = -1
    for attempt in range(3):
        writer = (
            out.writeStream.format(sink)
            .option("towers", towers)
            .option("topic", OUT_TOPIC)
            .option("checkpointLocation", checkpoint)
        )
        if trigger == "drain":
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime="500 milliseconds")
        query = writer.start()
        while query.isActive:
            query.awaitTermination(1)
            p = query.lastProgress
            if p is not None and p["batchId"] != last:
                last = p["batchId"]
                print(f"batch {last} rows {p['numInputRows']}", flush=True)
        error = query.exception()
        if error is None:
            break
        # Spark's fixed 10 s connect-back of a streaming source's Python process (see
        # tests/spark/eos_driver.py): on a loaded machine, start again from the checkpoint
        if CONNECT_BACK not in str(error) or attempt == 2:
            raise SystemExit(f"query failed: {error}")
        print(f"restart after: {CONNECT_BACK}", flush=True)
    print("done", flush=True)
    spark.stop()


# -- the runner ------------------------------------------------------------------------------


class Publisher:
    """Two named producers at ``rate`` records/s each, in a thread; values name their offset."""

    def __init__(self, towers: str, rate: float) -> None:
        self.towers = towers
        self.rate = rate
        self.sent: dict[str, int] = {f"{p}.0": 0 for p in PARTITIONS}
        self.unacked = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="publisher", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            producers = [
                Producer(IN_TOPIC, towers=self.towers, name=p, partitions=1, batching=False)
                for p in PARTITIONS
            ]
            started = time.monotonic()
            while not self._stop.is_set():
                due = int((time.monotonic() - started) * self.rate)
                for producer, name in zip(producers, PARTITIONS, strict=True):
                    partition = f"{name}.0"
                    while self.sent[partition] < due:
                        producer.send(b"%s:%d" % (name.encode(), self.sent[partition]))
                        self.sent[partition] += 1
                self._stop.wait(0.05)
            for producer in producers:
                self.unacked += producer.flush(300)
                producer.close()
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(600)
        if self.error is not None:
            raise RuntimeError(f"the publisher failed: {self.error!r}") from self.error

    def values(self) -> list[bytes]:
        return [
            b"%s:%d" % (p.rsplit(".", 1)[0].encode(), i)
            for p, n in self.sent.items()
            for i in range(n)
        ]


@dataclass
class Run:
    """One driver process on one checkpoint."""

    proc: subprocess.Popen[str]
    log: Path
    fail_batches: list[int]
    batches: list[int] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    def watch(self) -> None:
        assert self.proc.stdout is not None
        with self.log.open("w") as out:
            for line in self.proc.stdout:
                self.lines.append(line)
                out.write(line)
                out.flush()
                if line.startswith("batch "):
                    self.batches.append(int(line.split()[1]))

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)  # driver, JVM and Python workers
        self.proc.wait()


def start_run(
    towers: str, checkpoint: Path, starting: str, trigger: str, logs: Path, n: int, fail: list[int]
) -> Run:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    failing = ",".join(map(str, fail))
    proc = subprocess.Popen(
        [sys.executable, __file__, "drive", towers, str(checkpoint), starting, trigger, failing],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env=env,
    )
    run = Run(proc, logs / f"driver-{n:03d}.log", fail)
    threading.Thread(target=run.watch, daemon=True).start()
    return run


def _log_file(directory: Path) -> tuple[int, Path] | None:
    """The highest-numbered file of a checkpoint log (``offsets/``, ``commits/``)."""
    if not directory.is_dir():
        return None
    found = [int(p.name) for p in directory.iterdir() if p.name.isdigit()]
    if not found:
        return None
    top = max(found)
    return top, directory / str(top)


def checkpoint_offsets(checkpoint: Path, log: str) -> tuple[int, Offsets] | None:
    """(batch, end offsets) of the last batch in the checkpoint's ``log`` (``offsets``: the
    last planned batch; ``commits``: the last one Spark logged as done)."""
    found = _log_file(checkpoint / log)
    if found is None:
        return None
    batch = found[0]
    text = (checkpoint / "offsets" / str(batch)).read_text().splitlines()
    offsets = json.loads(text[-1])  # v1, the batch metadata, then one line per source
    return batch, {str(p): int(o) for p, o in offsets.get(IN_TOPIC, {}).items()}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["drive"]:
        drive(*argv[1:6])
        return 0
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rate", type=float, default=100.0, help="records/s per partition")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    scratch = Path(tempfile.mkdtemp(prefix="dafka-spark-chaos-"))
    logs = scratch / "logs"
    logs.mkdir()
    checkpoint = scratch / "checkpoint"
    procs = Processes(logs)
    faults = Counter[str]()
    failures: list[str] = []
    windows: list[tuple[str, int, int]] = []  # (partition, start, end): a reset re-reads them
    run: Run | None = None
    runs = 0
    try:
        port = free_port_pair()
        towers = f"127.0.0.1:{port}"
        tower_proc = procs.spawn(
            "tower",
            [*DAFKA, "tower", "--sub", f"tcp://{towers}", "--pub", f"tcp://127.0.0.1:{port + 1}"],
        )
        tower = TowerProc(tower_proc, *tower_proc.wait_log(_TOWER_READY).groups())
        stores = [procs.store(scratch / f"store-{i}", [tower], fsync="ms:5") for i in range(2)]
        publisher = Publisher(towers, args.rate)

        def next_fail() -> list[int]:
            top = _log_file(checkpoint / "offsets")
            first = top[0] + 1 if top else 0
            return sorted(rng.sample(range(first, first + 8), 2))

        starting = "earliest"
        current: Offsets = {}  # where the current query started ({}: earliest)
        run = start_run(towers, checkpoint, starting, "stream", logs, runs, next_fail())
        runs += 1
        end = time.monotonic() + args.minutes * 60
        next_fault = time.monotonic() + rng.uniform(15, 45)
        while time.monotonic() < end:
            if run.proc.poll() is not None:
                failures.append(f"driver run {runs - 1} exited {run.proc.returncode}: {run.log}")
                break
            if not run.batches:  # a fault only once the query runs (its start takes ~10 s)
                next_fault = max(next_fault, time.monotonic() + rng.uniform(5, 30))
            elif time.monotonic() >= next_fault:
                roll = rng.random()
                if roll < 0.2:
                    i = rng.randrange(2)
                    stores[i].proc.kill()
                    faults["store kill"] += 1
                    time.sleep(rng.uniform(1, 3))
                    stores[i] = procs.store(stores[i].data_dir, [tower], fsync="ms:5")
                else:
                    run.kill()
                    if roll < 0.6:
                        faults["driver kill"] += 1
                    else:
                        faults["checkpoint reset"] += 1
                        committed = checkpoint_offsets(checkpoint, "commits")
                        planned = checkpoint_offsets(checkpoint, "offsets")
                        done = committed[1] if committed else current
                        ends = planned[1] if planned else {}
                        start = {p: max(0, done.get(p, 0) - rng.randrange(151)) for p in done}
                        for p in set(done) | set(ends):  # what the new query may read again
                            windows.append(
                                (p, start.get(p, 0), max(done.get(p, 0), ends.get(p, 0)))
                            )
                        shutil.rmtree(checkpoint)
                        current = start
                        starting = json.dumps({IN_TOPIC: start}) if start else "earliest"
                    run = start_run(towers, checkpoint, starting, "stream", logs, runs, next_fail())
                    runs += 1
                print(
                    f"{time.strftime('%H:%M:%S')} faults so far: {dict(faults)}; "
                    f"published {sum(publisher.sent.values())}",
                    flush=True,
                )
                next_fault = time.monotonic() + rng.uniform(15, 45)
            time.sleep(0.2)
        publisher.stop()
        if publisher.unacked:
            failures.append(f"{publisher.unacked} input records not ACKed")
        run.kill()
        run = start_run(towers, checkpoint, starting, "drain", logs, runs, [])
        runs += 1
        run.proc.wait(1800)
        if run.proc.returncode != 0 or not any(line == "done\n" for line in run.lines):
            failures.append(f"the final run exited {run.proc.returncode}: {run.log}")
        expected = publisher.values()
        got = Counter(committed_values(_Towers(towers), OUT_TOPIC, timeout=300))
        retried = retried_attempts(towers)
        allowed = Counter[bytes]()
        for partition, lo, hi in windows:
            name = partition.rsplit(".", 1)[0].encode()
            allowed.update(b"%s:%d" % (name, i) for i in range(lo, hi))
        lost = sum(1 for v in expected if not got[v])
        duplicated = sum(n - 1 for n in got.values() if n > 1)
        unexpected = sum(max(0, n - 1 - allowed[v]) for v, n in got.items())
        known = set(expected)
        strangers = sum(n for v, n in got.items() if v not in known)
        print(f"minutes        {args.minutes}")
        print(
            f"records        {len(expected)} published ({args.rate:g}/s x {len(PARTITIONS)}), "
            f"{sum(got.values())} committed in {OUT_TOPIC}"
        )
        print(
            f"faults         {sum(faults.values())}: {faults['driver kill']} driver kills "
            f"(same checkpoint), {faults['checkpoint reset']} checkpoint resets, "
            f"{faults['store kill']} store kills; {retried} task attempts retried after an "
            f"injected failure (their rows left uncommitted); {runs} driver runs"
        )
        print(f"lost           {lost}")
        print(
            f"duplicated     {duplicated} ({duplicated - unexpected} re-read by a reset's new "
            f"query, by design; {unexpected} unexpected)"
        )
        print(f"foreign        {strangers}")
        if lost or unexpected or strangers:
            failures.append(f"lost {lost}, unexpected duplicates {unexpected}, foreign {strangers}")
        for failure in failures:
            print(f"FAILED: {failure}")
        print("OK" if not failures else f"FAILED (logs in {logs})")
        return 0 if not failures else 1
    finally:
        if run is not None:
            run.kill()
        procs.close()
        if not args.keep and not failures:
            shutil.rmtree(scratch, ignore_errors=True)


def retried_attempts(towers: str) -> int:
    """The task attempts > 0 that wrote rows: (partition, batch, attempt) of the CONTINUE
    clocks in ``sc-out`` (``dafka.spark._txn``'s layout), read uncommitted."""
    seen = set()
    for r in read_to_heads(_Towers(towers), OUT_TOPIC, "read_uncommitted", timeout=300):
        if r.uuid is None:
            continue
        u = uuid.UUID(bytes=r.uuid)
        clock = get_clock(u)
        if get_flags(u) == Flags.CONTINUE_TXN and (clock >> 24) & 0xFF:
            seen.add((r.partition, clock >> 24))
    return len(seen)


@dataclass(frozen=True)
class _Towers:
    towers: str


if __name__ == "__main__":
    sys.exit(main())
