"""Secured (CURVE) and with permissions vs plaintext, in one run (issue 19): throughput and
latency of a real cluster.

For each mode a ``LocalCluster`` (a ``dafka tower`` and ``dafka store`` process, ``--fsync
ms:5``; secured: ``--key``/``--authorized-keys``; acl: secured, and the store and the
clients given ``--acl``/``acl=`` granting the client every topic, so each reads its peers on
per-peer sockets through the guard) and clients in this process (their node threads;
secured: their own ``key=``/``authorized_keys=``):

* producer throughput, batched (``Producer.produce``, many messages per RECORD) and
  per-record (``batching=False``, one RECORD per message): first ``produce`` until every
  message is ACKed (``flush``), messages/s;
* consumer throughput: a consumer started afterwards reads every message back from the
  store (constructor to last message), for both topics;
* ACK latency: one message at a time, ``send`` until ``flush`` returns, p50 and p99.

Then the ratios secured / plaintext and acl / plaintext of each figure (target: throughput
>= 0.7x). The modes alternate within one run on one machine; the last line gives the load
average.

The last row is libzmq's own floor, no dafka: raw pyzmq PUB -> SUB on loopback, one 100 B
message per send, plaintext vs CURVE. CURVE encrypts and authenticates each ZeroMQ message
on its own (``crypto_box`` per message, in the I/O threads), so one RECORD per message cannot
cost less, secured, than this row's ratio; batched RECORDs carry many messages per box.

Run: ``.venv/bin/python bench/security.py [--records N] [--samples N]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import zmq

from _procs import percentile
from dafka import Consumer, Producer
from dafka.server import LocalCluster
from dafka.transport.security import keygen

SIZE = 100


def _keys(root: Path) -> dict[str, Any]:
    keys, auth = root / "keys", root / "auth"
    keys.mkdir()
    auth.mkdir()
    for name in ("tower", "client"):
        public, _ = keygen(keys / name)
        shutil.copy(public, auth)
    acl = root / "acl.toml"
    acl.write_text(
        'stores = ["tower"]\n[[grant]]\nkeys = ["client"]\nproduce = ["*"]\nconsume = ["*"]\n'
    )
    return {
        "cluster": {"key": keys / "tower.key_secret", "authorized_keys": auth},
        "client": {"key": keys / "client.key_secret", "authorized_keys": auth},
        "acl": {"acl": acl},
    }


def _produce(common: dict[str, Any], topic: str, n: int, batching: bool) -> float:
    value = b"x" * SIZE
    with Producer(topic, batching=batching, **common) as producer:
        start = time.perf_counter()
        for _ in range(n):
            producer.produce(value)
        left = producer.flush(300)
        elapsed = time.perf_counter() - start
    if left:
        raise SystemExit(f"{left} messages not ACKed")
    return n / elapsed


def _consume(common: dict[str, Any], topic: str, n: int) -> float:
    start = time.perf_counter()
    got = 0
    with Consumer([topic], offset_reset="earliest", **common) as consumer:
        deadline = time.monotonic() + 300
        while got < n and time.monotonic() < deadline:
            got += len(consumer.poll(0.5))
    if got < n:
        raise SystemExit(f"read {got} of {n}")
    return n / (time.perf_counter() - start)


def _ack_latency(common: dict[str, Any], samples: int) -> tuple[float, float]:
    waits = []
    with Producer(f"lat-{uuid.uuid4().hex[:6]}", linger_ms=0, **common) as producer:
        producer.send(b"warm")
        producer.flush(30)
        for _ in range(samples):
            start = time.perf_counter()
            producer.send(b"x" * SIZE)
            producer.flush(30)
            waits.append((time.perf_counter() - start) * 1e6)
    waits.sort()
    return percentile(waits, 0.5), percentile(waits, 0.99)


def _zmq_floor(secured: bool, n: int) -> float:
    """Raw pyzmq PUB -> SUB messages/s, one message per send (CURVE when ``secured``)."""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    pub, sub = context.socket(zmq.PUB), context.socket(zmq.SUB)
    pub.setsockopt(zmq.SNDHWM, 0)
    sub.setsockopt(zmq.RCVHWM, 0)
    if secured:
        server_public, server_secret = zmq.curve_keypair()
        client_public, client_secret = zmq.curve_keypair()
        pub.curve_server = True
        pub.curve_secretkey, pub.curve_publickey = server_secret, server_public
        sub.curve_serverkey = server_public
        sub.curve_publickey, sub.curve_secretkey = client_public, client_secret
    port = pub.bind_to_random_port("tcp://127.0.0.1")
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.connect(f"tcp://127.0.0.1:{port}")
    deadline = time.monotonic() + 10
    while not sub.poll(50):  # joined: a probe arrives
        if time.monotonic() > deadline:
            raise SystemExit("the raw pyzmq floor's SUB never joined its PUB")
        pub.send(b"probe")
    while sub.poll(100):
        sub.recv()
    got = 0

    def receive() -> None:
        nonlocal got
        while got < n:
            sub.recv()
            got += 1

    message = b"x" * SIZE
    reader = threading.Thread(target=receive)
    started = time.perf_counter()
    reader.start()
    for _ in range(n):
        pub.send(message)
    reader.join()
    elapsed = time.perf_counter() - started
    pub.close(linger=0)
    sub.close(linger=0)
    context.term()
    return n / elapsed


def run(
    mode: str, root: Path, keys: dict[str, Any], records: int, samples: int
) -> dict[str, float]:
    secured = mode != "plaintext"
    acl = keys["acl"] if mode == "acl" else {}
    with LocalCluster(
        root / mode,
        stores=1,
        beacon_interval=0.2,
        **(keys["cluster"] if secured else {}),
        **acl,
    ) as cluster:
        common: dict[str, Any] = {
            "towers": cluster.towers,
            "beacon_interval": 0.2,
            "bind_host": "127.0.0.1",
            **(keys["client"] if secured else {}),
            **acl,
        }
        out = {
            "batched produce": _produce(common, "batched", records, True),
            "per-record produce": _produce(common, "single", records // 4, False),
            "batched consume": _consume(common, "batched", records),
            "per-record consume": _consume(common, "single", records // 4),
        }
        p50, p99 = _ack_latency(common, samples)
        out["ack p50 us"], out["ack p99 us"] = p50, p99
    out["raw pyzmq PUB/SUB"] = _zmq_floor(secured, records)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--samples", type=int, default=500)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="dafka-bench-security-"))
    try:
        keys = _keys(root)
        results = {
            mode: run(mode, root, keys, args.records, args.samples)
            for mode in ("plaintext", "secured", "acl")
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)
    plain, secured, acl = results["plaintext"], results["secured"], results["acl"]
    print(
        f"{'figure':<22}{'plaintext':>14}{'secured':>14}{'acl':>14}"
        f"{'secured/plain':>15}{'acl/plain':>11}"
    )
    for name in plain:
        unit = "" if name.startswith("ack") else " msg/s"
        print(
            f"{name:<22}{plain[name]:>14,.0f}{secured[name]:>14,.0f}{acl[name]:>14,.0f}"
            f"{secured[name] / plain[name]:>14.2f}x{acl[name] / plain[name]:>10.2f}x{unit}"
        )
    print(f"records {args.records:,} of {SIZE} B, load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
