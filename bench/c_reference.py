"""Our cluster next to its anchors, alternated in one run: ratios that survive a busy machine.

The throughput targets of issue 9 are set against the C reference (zeromq/dafka) measured on
this machine on some day, and this machine's speed drifts by up to 3x between days: an
absolute figure only means something next to the anchor measured in the same run. This
script measures both, one after the other, in the scenario of ``bench/cluster.py``'s
unbatched throughput (one RECORD per message, 100 B): a producer publishes ``--records``
records to two stores and waits until every record is ACKed (by a store: the C producer
drops a record from its unacked list on the first store's ACK, and our producer's default
``min_stores=1`` does the same), then a late consumer (``earliest``) reads the whole history
back from the two stores. Each round runs the anchors, then ours (tower, stores, producer
and consumer each in its own process; ours through ``bench/cluster.py``'s ``throughput``
helper and ``bench/_procs.py``'s ``ProcessCluster``, so both bench scripts measure the same
code), and prints records/s, CPU microseconds per record and the load average, then the
ratios ours / anchor of that round; the last lines give the median ratios over the rounds.
The anchors are the raw-pyzmq floors of the same topology (``bench/zmq_floor.py``'s ``raw``
scenarios, pre-built frames: the transport alone, and its ``codec`` ones: what any Python
implementation can reach per RECORD; their catch-up is timed from the FETCH, so compare it
with our consumer's rate after its first record) and, with ``--c-bin``, the C reference.
``--mixed`` adds a C producer publishing into our stores, read back by our consumer.

``--c-bin DIR`` names the directory of the drivers: ``make c-reference`` (``bench/c/build.sh``)
builds them from their sources in ``bench/c/`` into ``build/c-reference/bin``, against the
zeromq/dafka sources at a pinned commit and a CZMQ built with its draft API (Debian's
``libczmq-dev`` lacks it), with libzmq and libleveldb from Debian; nothing is installed
system-wide. The script runs four of them, each a thin driver around one C actor and named
after it:

* ``c_tower SUB PUB`` runs ``dafka_tower_actor`` with its XSUB bound at ``SUB`` and its XPUB
  at ``PUB`` until SIGTERM;
* ``c_store DB SUB PUB`` runs ``dafka_store_actor`` (its writer and reader) on the leveldb
  database ``DB``, beaconing through the tower at ``SUB``/``PUB``, until SIGTERM;
* ``c_producer SUB PUB TOPIC COUNT SIZE WARMUP_MS`` starts ``dafka_producer``, sleeps
  ``WARMUP_MS`` (the stores connect), publishes ``COUNT`` records of ``SIZE`` bytes (the last
  filled with ``E``), destroys the producer (the C producer ends only once every record is
  ACKed) and prints ``produced COUNT PUBLISH_US TOTAL_US CPU_S``;
* ``c_consumer SUB PUB TOPIC COUNT RESET TIMEOUT_MS`` starts ``dafka_consumer`` with offset
  reset ``RESET``, reads ``COUNT`` records (giving up after ``TIMEOUT_MS`` of silence) and
  prints ``consumed COUNT FIRST_US LAST_US CPU_S`` (microseconds from its creation).

``c_latency SUB PUB TOPIC RATE COUNT SIZE WARMUP_MS`` (``--latency-seconds``) runs a C
consumer and a C producer in one process (each an actor with its own sockets), publishes
COUNT stamped records at RATE records/s and prints ``latency N P50_US P99_US``, publish to
the consumer's receive; ours is ``bench/cluster.py``'s latency (one RECORD per publish, to
``poll`` returning it), with the producer and the consumer in one process as there
(``--latency-processes 2``: each in its own, as ``bench/cluster.py`` runs it), and the raw
floor ``zmq_floor.run_pubsub``'s (a PUB in this process, a SUB in another).
Each round runs the three ``--latency-repeats`` times (default 3), alternated, and reports
each one's median p50 and p99 and the ratios of those; the last line gives the median over
the rounds of ours / C's p99 (one run's p99 is the tail of a few thousand samples: on a
shared machine one stall moved it 1.0-1.7x between rounds).

The drivers set every socket's default high-water marks to 1,000,000 (dafka's configured
default; CZMQ's own 1,000 makes the C store reader drop a catch-up reply after 1,000
records) and advertise 127.0.0.1 in their beacons (4 frames ``B | id | host | port``, see
``../shared/PROTOCOL.md`` section 3), so that a C producer can join our tower in ``--mixed``.

Run: ``.venv/bin/python bench/c_reference.py [--c-bin DIR] [--records 100000] [--rounds 3]
[--mixed] [--latency-repeats 3] [--latency-processes 1]``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _procs import ProcessCluster, cpu_seconds, free_port_pair, stop_processes
from cluster import Results, consume_count, latency, latency_one_process, throughput
from zmq_floor import run_catchup, run_produce, run_pubsub


def _load() -> str:
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


class CCluster:
    """A C tower and ``stores`` C stores, each its own process, on loopback."""

    def __init__(self, bin_dir: Path, stores: int) -> None:
        self.bin_dir = bin_dir
        self.stores = stores
        self.port = 0
        self.store_pids: list[int] = []
        self._procs: list[subprocess.Popen[bytes]] = []
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    @property
    def addresses(self) -> list[str]:
        return [f"tcp://127.0.0.1:{self.port}", f"tcp://127.0.0.1:{self.port + 1}"]

    def __enter__(self) -> CCluster:
        self._tmp = tempfile.TemporaryDirectory(prefix="dafka-bench-c-")
        self.port = free_port_pair()
        output = None if os.environ.get("DAFKA_BENCH_VERBOSE") else subprocess.DEVNULL
        self._procs.append(
            subprocess.Popen(
                [str(self.bin_dir / "c_tower"), *self.addresses], stdout=output, stderr=output
            )
        )
        time.sleep(0.2)  # the tower binds before the stores' beacons connect (no readiness
        # signal exists; a store that connects first retries on its own anyway)
        for i in range(self.stores):
            db = str(Path(self._tmp.name) / f"store-{i}")
            store = subprocess.Popen(
                [str(self.bin_dir / "c_store"), db, *self.addresses], stdout=output, stderr=output
            )
            self._procs.append(store)
            self.store_pids.append(store.pid)
        return self

    def __exit__(self, *exc: object) -> None:
        stop_processes(self._procs)
        crashed = [p.args for p in self._procs if p.returncode not in (0, -signal.SIGTERM)]
        if crashed:
            print(f"  ! C processes ended badly: {crashed}")
        self._procs.clear()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def _result_line(tool: str, lines: list[str], returncode: int, stderr: str) -> list[str]:
    """The driver's result line, split (``RuntimeError`` if it printed none)."""
    found = [line.split() for line in lines if line.split()[:1] in (["produced"], ["consumed"])]
    if not found:
        raise RuntimeError(f"{tool} failed ({returncode}): {stderr[-500:]}")
    if returncode != 0:
        print(f"  ! {tool} exited {returncode}: {' '.join(found[0])}")
    return found[0]


def c_consume(bin_dir: Path, towers: list[str], topic: str, records: int) -> list[str]:
    done = subprocess.run(
        [str(bin_dir / "c_consumer"), *towers, topic, str(records), "earliest", "30000"],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return _result_line("c_consumer", done.stdout.splitlines(), done.returncode, done.stderr)


def c_produce(
    bin_dir: Path, towers: list[str], store_pids: list[int], topic: str, args: argparse.Namespace
) -> dict[str, float]:
    """Run ``c_producer``; store CPU counted from its "ready" line (warm-up over) to its end."""
    command = [str(bin_dir / "c_producer"), *towers, topic, str(args.records), str(args.size)]
    with subprocess.Popen(
        [*command, str(args.c_warmup_ms)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        store_cpu = sum(cpu_seconds(pid) for pid in store_pids)
        try:
            stdout, stderr = proc.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        store_cpu = sum(cpu_seconds(pid) for pid in store_pids) - store_cpu
    if ready.strip() != "ready":
        raise RuntimeError(f"c_producer did not start: {ready!r} {stderr[-500:]}")
    _, count, _publish_us, total_us, cpu = _result_line(
        "c_producer", stdout.splitlines(), proc.returncode, stderr
    )
    n = int(count)
    return {
        "produce": n / (int(total_us) / 1e6),
        "producer_us": float(cpu) / n * 1e6,
        "store_us": store_cpu / n * 1e6,
    }


def c_scenario(bin_dir: Path, args: argparse.Namespace, topic: str) -> dict[str, float]:
    with CCluster(bin_dir, args.stores) as cluster:
        result = c_produce(bin_dir, cluster.addresses, cluster.store_pids, topic, args)
        _, count, first_us, last_us, cpu = c_consume(
            bin_dir, cluster.addresses, topic, args.records
        )
    n = int(count)
    if n != args.records:
        print(f"  ! the C consumer got {n} of {args.records} records")
    result["consume"] = n / (int(last_us) / 1e6)
    result["first_ms"] = int(first_us) / 1e3
    result["stream"] = (n - 1) / ((int(last_us) - int(first_us)) / 1e6)
    result["consumer_us"] = float(cpu) / max(n, 1) * 1e6
    return result


def our_scenario(ctx: Any, args: argparse.Namespace, topic: str) -> dict[str, float]:
    with ProcessCluster(
        stores=args.stores, fsync=args.fsync, beacon_interval=args.beacon_interval
    ) as cluster:
        result = throughput(ctx, cluster, args.records, args.size, topic, False, args.client)
    total = args.records / result["consume"]
    result["stream"] = (args.records - 1) / (total - result["first_ms"] / 1e3)
    return result


def _settled_cpu(pids: list[int], limit: float = 15.0) -> float:
    """The processes' CPU seconds once it stopped growing for 0.3 s (their start-up over:
    a Python store's imports and recovery took ~1 s of CPU, which the per-record figure
    must not count), or after ``limit`` seconds."""
    deadline = time.monotonic() + limit
    cpu = sum(cpu_seconds(pid) for pid in pids)
    while time.monotonic() < deadline:
        time.sleep(0.3)
        now = sum(cpu_seconds(pid) for pid in pids)
        if now == cpu:
            break
        cpu = now
    return cpu


def c_latency(bin_dir: Path, args: argparse.Namespace, topic: str) -> tuple[float, ...]:
    """``c_latency`` on a C cluster: (p50, p99, the stores' CPU per record), in microseconds
    (the CPU from ``c_latency``'s start to its end: its warm-up, without records, included)."""
    count = int(args.latency_rate * args.latency_seconds)
    with CCluster(bin_dir, args.stores) as cluster:
        cpu = _settled_cpu(cluster.store_pids)
        done = subprocess.run(
            [
                str(bin_dir / "c_latency"),
                *cluster.addresses,
                topic,
                str(args.latency_rate),
                str(count),
                str(args.size),
                str(args.c_warmup_ms),
            ],
            check=False,
            capture_output=True,
            text=True,
            timeout=300,
        )
        cpu = sum(cpu_seconds(pid) for pid in cluster.store_pids) - cpu
    found = [line.split() for line in done.stdout.splitlines() if line.startswith("latency ")]
    if not found:
        raise RuntimeError(f"c_latency failed ({done.returncode}): {done.stderr[-500:]}")
    _, n, p50, p99 = found[0]
    if int(n) != count:
        print(f"  ! c_latency: {n} of {count} records received")
    return float(p50), float(p99), cpu / count * 1e6


def our_latency(ctx: Any, args: argparse.Namespace) -> tuple[float, ...]:
    """``bench/cluster.py``'s latency (one RECORD per publish) on our cluster, the producer
    and the consumer in one process as ``c_latency``'s (``latency_one_process``) or, with
    ``--latency-processes 2``, each in its own: (p50, p99, the stores' CPU per record) in
    microseconds (the CPU over the clients' start, their 0.5 s warm-up's records and the
    run)."""
    measure = latency if args.latency_processes == 2 else latency_one_process
    with ProcessCluster(
        stores=args.stores, fsync=args.fsync, beacon_interval=args.beacon_interval
    ) as cluster:
        stores = [pid for name, pid in cluster.pids.items() if name.startswith("store")]
        cpu = _settled_cpu(stores)
        result = measure(ctx, cluster, args.latency_rate, args.latency_seconds, args.size)
        cpu = sum(cpu_seconds(pid) for pid in stores) - cpu
    count = args.latency_rate * (args.latency_seconds + 0.5)
    return float(result[2]), float(result[3]), cpu / count * 1e6


def raw_latency(args: argparse.Namespace) -> tuple[float, ...]:
    count = int(args.latency_rate * args.latency_seconds)
    _, latencies = run_pubsub(count, args.size, args.latency_rate)
    return latencies[len(latencies) // 2], latencies[int(len(latencies) * 0.99)]


def mixed_scenario(
    ctx: Any, bin_dir: Path, args: argparse.Namespace, topic: str
) -> dict[str, float]:
    """A C producer publishing into our tower and stores; our late consumer reads it back."""
    with ProcessCluster(
        stores=args.stores, fsync=args.fsync, beacon_interval=args.beacon_interval
    ) as cluster:
        towers = [f"tcp://127.0.0.1:{cluster.port}", f"tcp://127.0.0.1:{cluster.port + 1}"]
        store_pids = [pid for name, pid in cluster.pids.items() if name.startswith("store")]
        result = c_produce(bin_dir, towers, store_pids, topic, args)
        out: Results = ctx.Queue()
        consumer = ctx.Process(
            target=consume_count, args=(cluster.port, cluster.beacon_interval, topic, 0, out)
        )
        consumer.start()
        message = out.get(timeout=120)
        if message[0] != "consumer-ready":
            raise RuntimeError(f"our consumer: {message}")
        message = out.get(timeout=600)
        consumer.join()
    _, started, first, last, count, cpu, _fetches, _ahead, ratio = message
    if count != args.records:
        print(f"  ! our consumer got {count} of {args.records} records from our stores")
    result["consume"] = count / ((last - started) / 1e9)
    result["first_ms"] = (first - started) / 1e6
    result["stream"] = (count - 1) / ((last - first) / 1e9)
    result["consumer_us"] = cpu / max(count, 1) * 1e6
    result["received_ratio"] = ratio
    return result


def latency_round(ctx: Any, args: argparse.Namespace, round_: int, p99_vs_c: list[float]) -> None:
    """``--latency-repeats`` runs of raw pyzmq, C and ours, alternated (so that each meets
    the same load), each ``--latency-seconds`` long: a p99 is the 1% tail of one run's few
    thousand samples, which one scheduler stall moves, so each system's p50 and p99 are the
    medians over the runs, and their ratios are taken of those medians."""
    at = f"at {args.latency_rate:,.0f} rec/s"
    runs: dict[str, list[tuple[float, ...]]] = {"raw": [], "C": [], "ours": []}
    for repeat in range(args.latency_repeats):
        runs["raw"].append(raw_latency(args))
        if args.c_bin is not None:
            runs["C"].append(c_latency(args.c_bin, args, f"cl{round_}x{repeat}"))
        runs["ours"].append(our_latency(ctx, args))
        line = ", ".join(
            f"{name} {found[-1][0]:.0f} / {found[-1][1]:.0f}"
            + (f" (stores' CPU {found[-1][2]:.0f} us/record)" if len(found[-1]) > 2 else "")
            for name, found in runs.items()
            if found
        )
        print(f"    latency run {repeat + 1}, p50 / p99 us: {line} [load {_load()}]", flush=True)
    medians = {
        name: (statistics.median(p[0] for p in found), statistics.median(p[1] for p in found))
        for name, found in runs.items()
        if found
    }
    n = f"median of {args.latency_repeats} runs of {args.latency_seconds:g} s"
    ours = "ours" if args.latency_processes == 1 else "ours (2 processes)"
    for name, label in (("raw", "raw pyzmq PUB->SUB"), ("C", "C reference"), ("ours", ours)):
        if name in medians:
            p50, p99 = medians[name]
            cpu = (
                f", stores' CPU {statistics.median(p[2] for p in runs[name]):.0f} us/record"
                if name != "raw"
                else ""
            )
            print(f"  {label} latency {at}: p50 {p50:.0f} us, p99 {p99:.0f} us{cpu} ({n})")
    p50, p99 = medians["ours"]
    if "C" in medians:
        c_p50, c_p99 = medians["C"]
        print(f"  ours / C latency: p50 {p50 / c_p50:.2f}, p99 {p99 / c_p99:.2f}")
        p99_vs_c.append(p99 / c_p99)
    raw_p50, raw_p99 = medians["raw"]
    print(f"  ours / raw latency: p50 {p50 / raw_p50:.2f}, p99 {p99 / raw_p99:.2f}")


def _line(name: str, r: dict[str, float]) -> str:
    ratio = f", received/delivered {r['received_ratio']:.2f}" if "received_ratio" in r else ""
    return (
        f"  {name:<22} producer->ACKed {r['produce']:>9,.0f} rec/s | late consumer "
        f"{r['consume']:>9,.0f} rec/s (first after {r['first_ms']:.0f} ms, then "
        f"{r['stream']:,.0f} rec/s{ratio}) | CPU "
        f"us/record: producer {r['producer_us']:.1f}, stores {r['store_us']:.1f}, consumer "
        f"{r['consumer_us']:.1f} [load {_load()}]"
    )


def _ratios(name: str, ratios: dict[str, list[float]], median: bool = False) -> str:
    pick = statistics.median if median else (lambda values: values[-1])
    return (
        f"ours / {name}: producer->ACKed {pick(ratios['produce']):.2f}, late consumer "
        f"{pick(ratios['consume']):.2f} (after the first record: {pick(ratios['stream']):.2f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--c-bin",
        type=Path,
        help="directory of the drivers built from zeromq/dafka: c_tower, c_store, c_producer, "
        "c_consumer (see this script's docstring); without it, only the pyzmq floor and ours",
    )
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--stores", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3, help="anchors then ours, N times")
    parser.add_argument("--fsync", default="ms:5", help="our stores' fsync policy")
    parser.add_argument("--client", default="unbatched", help="bench/cluster.py's client")
    parser.add_argument("--beacon-interval", type=float, default=1.0)
    parser.add_argument(
        "--c-warmup-ms", type=int, default=2000, help="C producer: wait before publishing"
    )
    parser.add_argument(
        "--mixed", action="store_true", help="also a C producer -> our stores -> our consumer"
    )
    parser.add_argument(
        "--latency-rate", type=float, default=1000.0, help="records/s of the latency runs"
    )
    parser.add_argument(
        "--latency-seconds", type=float, default=5.0, help="seconds of each latency run; 0: none"
    )
    parser.add_argument(
        "--latency-processes",
        type=int,
        choices=(1, 2),
        default=1,
        help="ours: producer and consumer in one process (as c_latency) or in two",
    )
    parser.add_argument(
        "--latency-repeats",
        type=int,
        default=3,
        help="latency runs per round of each system, alternated (medians are reported)",
    )
    parser.add_argument(
        "--no-floor", action="store_true", help="skip bench/zmq_floor.py's codec scenarios"
    )
    args = parser.parse_args()
    if args.c_bin is not None:
        missing = [
            tool
            for tool in ("c_tower", "c_store", "c_producer", "c_consumer")
            if not os.access(args.c_bin / tool, os.X_OK)
        ]
        if missing:
            parser.error(f"--c-bin {args.c_bin}: no executable {', '.join(missing)}")
    ctx = multiprocessing.get_context("spawn")
    print(
        f"{args.records:,} records of {args.size} B, {args.stores} stores (ours: fsync "
        f"{args.fsync}, client {args.client}); {os.cpu_count()} CPUs; load {_load()}"
    )
    vs_c: dict[str, list[float]] = {"produce": [], "consume": [], "stream": []}
    vs_floor: dict[str, list[float]] = {"produce": [], "consume": [], "stream": []}
    vs_raw: dict[str, list[float]] = {"produce": [], "consume": [], "stream": []}
    p99_vs_c: list[float] = []
    for round_ in range(1, args.rounds + 1):
        print(f"round {round_}:", flush=True)
        floor: dict[str, float] = {}
        raw: dict[str, float] = {}
        if not args.no_floor:
            produced = run_produce(args.records, args.size, False, args.stores)
            print(f"  pyzmq floor, {produced.line()}", flush=True)
            caught_up = run_catchup(args.records, args.size, False)
            print(f"  pyzmq floor, {caught_up.line()}", flush=True)
            raw = {"produce": produced.rate, "consume": caught_up.rate}
            raw["stream"] = caught_up.rate
            produced = run_produce(args.records, args.size, True, args.stores)
            print(f"  pyzmq floor, {produced.line()}", flush=True)
            caught_up = run_catchup(args.records, args.size, True)
            print(f"  pyzmq floor, {caught_up.line()}", flush=True)
            floor = {"produce": produced.rate, "consume": caught_up.rate}
            floor["stream"] = caught_up.rate
        c: dict[str, float] = {}
        if args.c_bin is not None:
            c = c_scenario(args.c_bin, args, f"c{round_}")
            print(_line("C reference", c), flush=True)
        ours = our_scenario(ctx, args, f"o{round_}")
        print(_line("ours", ours), flush=True)
        if args.c_bin is not None and args.mixed:
            mixed = mixed_scenario(ctx, args.c_bin, args, f"m{round_}")
            print(_line("C producer, our stores", mixed), flush=True)
        anchors = ((c, vs_c, "C"), (floor, vs_floor, "codec floor"), (raw, vs_raw, "raw floor"))
        for anchor, ratios, name in anchors:
            if anchor:
                for key, values in ratios.items():
                    values.append(ours[key] / anchor[key])
                print(f"  {_ratios(name, ratios)}", flush=True)
        if args.latency_seconds > 0:
            latency_round(ctx, args, round_, p99_vs_c)
    for ratios, name in ((vs_c, "C"), (vs_floor, "codec floor"), (vs_raw, "raw floor")):
        if ratios["produce"]:
            print(
                f"median over {args.rounds} round(s), {_ratios(name, ratios, median=True)} "
                f"[load {_load()}]"
            )
    if p99_vs_c:
        print(
            f"median over {args.rounds} round(s), latency p99 ours / C: "
            f"{statistics.median(p99_vs_c):.2f} (per round: "
            f"{', '.join(f'{r:.2f}' for r in p99_vs_c)})"
        )


if __name__ == "__main__":
    main()
