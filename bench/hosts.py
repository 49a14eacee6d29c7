"""Throughput and latency between two hosts, with 0, 1 and 50 ms of added latency, in one run.

Two hosts made of Linux network namespaces (``dafka.testing.Hosts``, root): ``srv`` runs
``dafka tower --bind '*'``, a store and the consumer; ``cli`` runs the producer, so every
message crosses the link twice over (producer -> store and producer -> consumer, each
way). Every node names only the tower (``--tower SRV:5556``, the README's flags). For each
added one-way latency on ``cli``'s link (``--delays``, ms, each way: ``tc netem`` where the
kernel has it, else the user space link of ``dafka.testing._link``; the run says which) and
each producer mode (``batched``: many messages per RECORD, the default; ``per-record``:
``batching=False``, one RECORD per message), it prints:

The producer first sends one message and waits until it is stored (the stores have found it
and connected), then:

* throughput: ``--count`` messages of ``--size`` bytes sent as fast as ``send`` takes them,
  until every one is ACKed (msg/s at the producer) and until the consumer got the last one
  (msg/s at the consumer, from its first message);
* latency at a steady ``--rate`` for ``--seconds``: p50/p99 from ``send`` to the store's ACK
  (producer side) and from ``send`` to ``poll`` returning it on the other host (the value
  carries ``time.time_ns()``; namespaces share the clock).

Run: ``.venv/bin/python bench/hosts.py [--delays 0,1,50] [--count 20000] [--quick]`` (as
root). Each line ends with the load average: the machine may be shared, compare figures of
one run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from dafka import Consumer, Producer
from dafka.testing import Hosts

DAFKA = [sys.executable, "-m", "dafka"]
HERE = Path(__file__).resolve()


def _percentile(values: list[float], share: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


# -- the roles, each run on its host by this same script ------------------------------------


def role_produce(args: argparse.Namespace) -> dict[str, Any]:
    acked: list[float] = []
    lock = threading.Lock()
    pad = b"." * max(0, args.size - 40)
    with Producer(args.topic, towers=args.towers, batching=not args.per_record) as producer:
        # one message first, until stored: the runs measure a joined producer, not the
        # stores discovering it (the records sent before they connect are fetched later)
        producer.send(b"-1:0:").result(timeout=60)
        started = time.monotonic()
        for i in range(args.count):
            if args.send_rate:
                ahead = started + i / args.send_rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
            sent = time.monotonic()

            def done(_f: Any, sent: float = sent) -> None:
                with lock:
                    acked.append(time.monotonic() - sent)

            producer.send(b"%d:%d:" % (i, time.time_ns()) + pad).add_done_callback(done)
        left = producer.flush(timeout=300)
        seconds = time.monotonic() - started
    ms = [a * 1000 for a in acked]
    return {
        "rate": args.count / seconds,
        "not_acked": left,
        "ack_p50": _percentile(ms, 0.5),
        "ack_p99": _percentile(ms, 0.99),
    }


def role_consume(args: argparse.Namespace) -> dict[str, Any]:
    latencies: list[float] = []
    seen: set[int] = set()
    with Consumer([args.topic], towers=args.towers, offset_reset="earliest") as consumer:
        print(json.dumps({"ready": True}), flush=True)
        first: float | None = None
        deadline = time.monotonic() + 600
        while len(seen) < args.count and time.monotonic() < deadline:
            for record in consumer.poll(timeout=0.5):
                now = time.time_ns()
                if first is None:
                    first = time.monotonic()
                index, sent, _ = record.value.split(b":", 2)
                if index == b"-1":  # the producer's warm-up message
                    continue
                seen.add(int(index))
                latencies.append((now - int(sent)) / 1e6)
        seconds = time.monotonic() - (first or time.monotonic())
    return {
        "received": len(seen),
        "rate": len(seen) / seconds if seconds > 0 else float("nan"),
        "p50": _percentile(latencies, 0.5),
        "p99": _percentile(latencies, 0.99),
    }


# -- the driver -----------------------------------------------------------------------------


def _role(hosts: Hosts, host: str, role: str, towers: str, topic: str, extra: list[str]) -> Any:
    argv = [sys.executable, str(HERE), "--role", role, "--towers", towers, "--topic", topic]
    return subprocess.Popen(
        hosts[host].command([*argv, *extra]),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # the plaintext warning of every client, once each
        text=True,
    )


def _result(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = proc.communicate(timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"a bench role failed (exit {proc.returncode}): {proc.args!r}")
    return dict(json.loads(out.strip().splitlines()[-1]))


def _run(hosts: Hosts, towers: str, topic: str, produce: list[str], count: int) -> Any:
    consumer = _role(hosts, "srv", "consume", towers, topic, ["--count", str(count)])
    assert consumer.stdout is not None
    consumer.stdout.readline()  # ready
    producer = _role(hosts, "cli", "produce", towers, topic, ["--count", str(count), *produce])
    return _result(producer), _result(consumer)


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def _daemon(hosts: Hosts, log: Path, argv: list[str], ready: str) -> subprocess.Popen[bytes]:
    """``argv`` on host srv, once it logged ``ready`` (its stderr in ``log``)."""
    with log.open("wb") as err:
        proc = subprocess.Popen(hosts["srv"].command(argv), stderr=err)
    deadline = time.monotonic() + 60
    while ready not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"{argv[3]} did not start:\n{log.read_text(errors='replace')}")
        time.sleep(0.05)
    return proc


def drive(args: argparse.Namespace) -> None:
    delays = [float(d) for d in args.delays.split(",")]
    with tempfile.TemporaryDirectory() as data, Hosts(["srv", "cli"], impairable=["cli"]) as hosts:
        towers = f"{hosts['srv'].address}:5556"
        print(
            f"two hosts: srv {hosts['srv'].address} (tower, store, consumer), cli "
            f"{hosts['cli'].address} (producer); latency added with {hosts.impairment}"
        )
        logs = Path(data) / "logs"
        logs.mkdir()
        daemons = [
            _daemon(hosts, logs / "tower.err", [*DAFKA, "tower", "--bind", "*"], "tower ready"),
            _daemon(
                hosts,
                logs / "store.err",
                [*DAFKA, "store", "--data", str(Path(data) / "store"), "--tower", towers],
                "ready (writer",
            ),
        ]
        try:
            run = 0
            for delay in delays:
                hosts.impair("cli", delay)
                for mode in ("batched", "per-record"):
                    flags = ["--size", str(args.size)] + (
                        ["--per-record"] if mode != "batched" else []
                    )
                    count = args.count if mode == "batched" else max(1, args.count // 4)
                    run += 1
                    p, c = _run(hosts, towers, f"tp{run}", flags, count)
                    print(
                        f"+{delay:g} ms {mode:>10}: throughput {count} x {args.size} B: producer "
                        f"{p['rate']:,.0f} msg/s (all ACKed), consumer {c['rate']:,.0f} msg/s "
                        f"({c['received']}/{count}); {load()}",
                        flush=True,
                    )
                    steady = int(args.rate * args.seconds)
                    run += 1
                    p, c = _run(
                        hosts, towers, f"lat{run}", [*flags, "--send-rate", str(args.rate)], steady
                    )
                    print(
                        f"+{delay:g} ms {mode:>10}: latency at {args.rate:g} msg/s: ACK p50 "
                        f"{p['ack_p50']:.1f} ms p99 {p['ack_p99']:.1f} ms; end to end p50 "
                        f"{c['p50']:.1f} ms p99 {c['p99']:.1f} ms ({c['received']}/{steady}); "
                        f"{load()}",
                        flush=True,
                    )
        finally:
            hosts.impair("cli", 0)
            for daemon in reversed(daemons):
                daemon.terminate()
                daemon.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delays", default="0,1,50", help="added one-way latencies, ms")
    parser.add_argument("--count", type=int, default=20_000, help="messages per throughput run")
    parser.add_argument("--size", type=int, default=100, help="message size in bytes")
    parser.add_argument("--rate", type=float, default=200.0, help="latency runs: msg/s")
    parser.add_argument("--seconds", type=float, default=5.0, help="latency runs: duration")
    parser.add_argument("--quick", action="store_true", help="small counts")
    parser.add_argument("--role", choices=["produce", "consume"], help=argparse.SUPPRESS)
    parser.add_argument("--towers", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--per-record", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--send-rate", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "produce":
        print(json.dumps(role_produce(args)))
    elif args.role == "consume":
        print(json.dumps(role_consume(args)))
    else:
        if args.quick:
            args.count, args.seconds = 4000, 2.0
        drive(args)


if __name__ == "__main__":
    main()
