"""The raw-pyzmq floor of our unbatched topology: what any Python node can reach here today.

No dafka code runs: plain pyzmq processes (``multiprocessing``, spawn) on loopback, wired as
a dafka cluster is (``src/dafka/transport/``: every node binds one data PUB on an ephemeral
port and reads its peers through SUB sockets, one SUB per peer where ACKs must be
attributed; LINGER and both high-water marks set as ``make_socket`` does). Every message has
two frames, sized as a Dafka RECORD of 100 B is on the wire (``../shared/PROTOCOL.md``
section 1): frame 0 = ``M`` + topic + ``\\0\\1`` + producer id (36 chars) + topic + sequence,
frame 1 = the body. Two scenarios:

* ``produce``: one producer PUBlishes ``--records`` messages to two "store" processes; each
  store drains what its SUB holds, appends every body to a file (buffered, never fsynced: the
  storage engine's unfsynced path) and then sends one cumulative ACK (frame 0 only) for the
  run it drained, on its own PUB; the producer reads ACKs through one SUB per store and stops
  when both stores ACKed the last sequence. Rate = records / (first send .. last ACK).
* ``catchup``: a "store" process holding ``--records`` bodies in a file answers one FETCH
  from a consumer (consumer PUB -> store SUB) with that many two-frame DIRECT-RECORDs on its
  PUB (store PUB -> consumer SUB, as our store reader replies). Rate = records / (FETCH sent
  .. last record received).

Each scenario runs in two variants: ``raw`` sends a pre-built frame 0 and reads nothing of
it (pure transport cost), ``codec`` packs frame 0 with ``struct`` per message and the
receiver unpacks it and checks the sequence follows the previous one (the least per-message
Python any implementation must run). Every line prints records/s, the CPU microseconds per
record of each process (``time.process_time``: all its threads, ZeroMQ's I/O thread too) and
the load average when it finished (``os.getloadavg()``): compare lines of one run only.

Run: ``.venv/bin/python bench/zmq_floor.py [--records 100000] [--size 100] [--repeat 1]``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import struct
import tempfile
import time
from dataclasses import dataclass
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Any, TypeAlias

import zmq

HWM = 1_000_000
LINGER_MS = 500
TOPIC = b"bench"
PRODUCER = b"0123abcd-4567-89ef-0123-456789abcdef"
CONSUMER = b"fedcba98-7654-3210-fedc-ba9876543210"
STORE = b"5555aaaa-4567-89ef-0123-456789abcdef"
SEQ = struct.Struct(">Q")
SEQ_COUNT = struct.Struct(">QL")
Results: TypeAlias = "Queue[tuple[Any, ...]]"
WARM_SEQ = 2**64 - 1
"""The sequence of warm-up messages: sent until every SUB is known to be connected."""


def _strings(*values: bytes) -> bytes:
    return b"".join(bytes((len(v),)) + v for v in values)


def record_head(command: bytes, prefix: bytes) -> bytes:
    """Frame 0 of a RECORD (``M``, prefix = topic) or DIRECT-RECORD (``D``, prefix =
    recipient) up to its sequence: the part that does not change between messages."""
    return command + prefix + b"\x00\x01" + _strings(PRODUCER, TOPIC)


def ack_frame(seq: int) -> bytes:
    return b"K" + PRODUCER + b"\x00\x01" + _strings(TOPIC) + SEQ.pack(seq)


def fetch_frame(seq: int, count: int) -> bytes:
    return b"F" + STORE + b"\x00\x01" + _strings(CONSUMER, TOPIC) + SEQ_COUNT.pack(seq, count)


def decode_record(frame: bytes) -> int:
    """The sequence of a RECORD / DIRECT-RECORD frame 0: find the terminator, walk the two
    strings, unpack the sequence (what a minimal decoder must do)."""
    end = frame.index(b"\x00", 1)
    if frame[end + 1] != 1:
        raise ValueError("bad version")
    at = end + 2
    at += 1 + frame[at]
    at += 1 + frame[at]
    return int(SEQ.unpack_from(frame, at)[0])


def make_socket(context: zmq.Context[zmq.Socket[bytes]], kind: int) -> zmq.Socket[bytes]:
    sock = context.socket(kind)
    sock.setsockopt(zmq.LINGER, LINGER_MS)
    sock.setsockopt(zmq.SNDHWM, HWM)
    sock.setsockopt(zmq.RCVHWM, HWM)
    return sock


def bind(sock: zmq.Socket[bytes]) -> int:
    sock.bind("tcp://127.0.0.1:*")
    endpoint = sock.getsockopt(zmq.LAST_ENDPOINT)
    assert isinstance(endpoint, bytes)
    return int(endpoint.rsplit(b":", 1)[1])


# -- produce: producer -> 2 stores, ACKs back ---------------------------------------------------


def store_process(producer_port: int, path: str, codec: bool, ports: Results, out: Results) -> None:
    """Drain the SUB, append bodies, one ACK per drained run; ends on the last sequence."""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    pub = make_socket(context, zmq.PUB)
    port = bind(pub)
    sub = make_socket(context, zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"M" + TOPIC)
    sub.connect(f"tcp://127.0.0.1:{producer_port}")
    ports.put(("store", port))
    recv = sub.recv
    more = zmq.RCVMORE
    noblock = zmq.NOBLOCK
    again = zmq.Again
    head = -1
    last: int | None = None
    cpu = 0.0
    count = 0
    with open(path, "ab") as f:
        write = f.write
        while last is None or head < last:
            sub.poll()
            ran = False
            while True:
                try:
                    frame0 = recv(noblock)
                except again:
                    break
                body = recv() if sub.getsockopt(more) else b""
                first = body[:1]
                if first == b"w":
                    pub.send(ack_frame(WARM_SEQ))
                    continue
                if codec:
                    seq = decode_record(frame0)
                    if seq != head + 1:
                        raise RuntimeError(f"store: expected {head + 1}, got {seq}")
                    head = seq
                else:
                    head += 1
                if count == 0:
                    cpu = time.process_time()
                count += 1
                if first == b"E":
                    last = head
                write(body)
                ran = True
            if ran:
                pub.send(ack_frame(head))
    cpu = time.process_time() - cpu
    out.put(("store", count, cpu))
    # Keep the PUB open until the producer has its last ACK (it says so by closing).
    time.sleep(0.5)
    context.destroy(linger=LINGER_MS)


def producer_process(
    records: int, size: int, stores: int, codec: bool, inbox: Results, out: Results
) -> None:
    """Warm up until every store ACKed, publish the burst, wait for both stores' last ACK."""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    pub = make_socket(context, zmq.PUB)
    out.put(("producer", bind(pub)))
    subs = []
    for _ in range(stores):
        kind, port = inbox.get()
        assert kind == "store-port"
        sub = make_socket(context, zmq.SUB)
        sub.setsockopt(zmq.SUBSCRIBE, b"K" + PRODUCER)
        sub.connect(f"tcp://127.0.0.1:{port}")
        subs.append(sub)
    poller = zmq.Poller()
    for sub in subs:
        poller.register(sub, zmq.POLLIN)
    head = record_head(b"M", TOPIC)
    acked = [-1] * stores
    warmed: set[int] = set()

    def drain(timeout: int) -> None:
        for sock, _ in poller.poll(timeout):
            i = subs.index(sock)
            while True:
                try:
                    frame = sock.recv(zmq.NOBLOCK)
                except zmq.Again:
                    break
                seq = SEQ.unpack_from(frame, len(frame) - 8)[0]
                if seq == WARM_SEQ:
                    warmed.add(i)
                else:
                    acked[i] = max(acked[i], seq)

    # Warm-up: every SUB in both directions is connected once each store ACKed a warm-up.
    warm = b"w" * size
    deadline = time.monotonic() + 60
    while len(warmed) < stores:
        if time.monotonic() > deadline:
            out.put(("error", "warm-up not ACKed within 60 s"))
            return
        pub.send(head + SEQ.pack(WARM_SEQ), zmq.SNDMORE)
        pub.send(warm)
        drain(10)
    send = pub.send
    sndmore = zmq.SNDMORE
    payload = b"x" * size
    pack = SEQ.pack
    fixed = head + pack(0)
    started = time.perf_counter()
    cpu = time.process_time()
    for seq in range(records - 1):
        send(head + pack(seq) if codec else fixed, sndmore)
        send(payload)
        if seq & 1023 == 1023:
            drain(0)
    send(head + pack(records - 1) if codec else fixed, sndmore)
    send(b"E" * size)
    deadline = time.monotonic() + 300
    while min(acked) < records - 1 and time.monotonic() < deadline:
        drain(100)
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu
    out.put(("producer", records, elapsed, cpu, min(acked) == records - 1))
    context.destroy(linger=0)


@dataclass(frozen=True)
class Floor:
    """One scenario's figures: records/s and CPU microseconds per record of each process."""

    scenario: str
    codec: bool
    records: int
    size: int
    rate: float
    cpu_us: dict[str, float]

    def line(self) -> str:
        cpu = ", ".join(f"{name} {us:.2f}" for name, us in self.cpu_us.items())
        variant = "codec" if self.codec else "raw  "
        return (
            f"{self.scenario:<9} {variant} {self.records:>9,} x {self.size} B: "
            f"{self.rate:>10,.0f} records/s  cpu us/record: {cpu}  load {_load()}"
        )


def run_produce(records: int, size: int, codec: bool, stores: int = 2) -> Floor:
    """Producer -> ``stores`` stores, until each ACKed the last (``RuntimeError`` if not)."""
    ctx = multiprocessing.get_context("spawn")
    ports: Results = ctx.Queue()
    to_producer: Results = ctx.Queue()
    out: Results = ctx.Queue()
    with tempfile.TemporaryDirectory(prefix="dafka-zmq-floor-") as tmp:
        producer = ctx.Process(
            target=producer_process, args=(records, size, stores, codec, to_producer, ports)
        )
        producer.start()
        kind, producer_port = ports.get(timeout=60)
        assert kind == "producer"
        procs = [producer]
        for i in range(stores):
            path = str(Path(tmp) / f"store-{i}.log")
            store = ctx.Process(target=store_process, args=(producer_port, path, codec, ports, out))
            store.start()
            procs.append(store)
            kind, port = ports.get(timeout=60)
            to_producer.put(("store-port", port))
        prod = ports.get(timeout=400)
        if prod[0] == "error":
            for p in procs:
                p.terminate()
            raise RuntimeError(f"floor producer: {prod[1]}")
        results = [out.get(timeout=60) for _ in range(stores)]
        for p in procs:
            p.join(30)
    _, n, elapsed, cpu, ok = prod
    stored = [r[1] for r in results]
    if not ok or stored != [n] * stores:
        raise RuntimeError(f"floor: not every record stored and ACKed: {stored} of {n}")
    cpu_us = {"producer": cpu / n * 1e6}
    cpu_us |= {f"store-{i}": r[2] / n * 1e6 for i, r in enumerate(results)}
    return Floor(f"produce->{stores} ACKed", codec, n, size, n / elapsed, cpu_us)


# -- catch-up: one store -> a consumer, DIRECT-RECORDs answering one FETCH ---------------------


def fetch_store_process(
    records: int, size: int, path: str, codec: bool, inbox: Results, out: Results
) -> None:
    """Answer warm-up FETCHes with one empty DIRECT-RECORD, the real one with the records."""
    with open(path, "wb") as f:
        for _ in range(records - 1):
            f.write(b"x" * size)
        f.write(b"E" * size)
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    pub = make_socket(context, zmq.PUB)
    out.put(("store", bind(pub)))
    kind, consumer_port = inbox.get(timeout=60)
    assert kind == "consumer-port"
    sub = make_socket(context, zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"F" + STORE)
    sub.connect(f"tcp://127.0.0.1:{consumer_port}")
    head = record_head(b"D", CONSUMER)
    send = pub.send
    sndmore = zmq.SNDMORE
    pack = SEQ.pack
    cpu = 0.0
    while True:
        frame = sub.recv()
        if codec:
            seq, count = SEQ_COUNT.unpack_from(frame, len(frame) - 12)
        else:
            seq, count = 0, records
        if frame.endswith(SEQ_COUNT.pack(WARM_SEQ, 0)):
            send(head + pack(WARM_SEQ), sndmore)
            send(b"")
            continue
        cpu = time.process_time()
        fixed = head + pack(0)
        with open(path, "rb") as f:
            f.seek(seq * size)
            read = f.read
            for s in range(seq, seq + count):
                send(head + pack(s) if codec else fixed, sndmore)
                send(read(size))
        break
    cpu = time.process_time() - cpu
    out.put(("store-done", records, cpu))
    time.sleep(0.5)
    context.destroy(linger=LINGER_MS)


def consumer_process(records: int, codec: bool, inbox: Results, out: Results) -> None:
    """FETCH every record (after a warm-up round trip), read until the last."""
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    pub = make_socket(context, zmq.PUB)
    out.put(("consumer", bind(pub)))
    kind, store_port = inbox.get(timeout=60)
    assert kind == "store-port"
    sub = make_socket(context, zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"D" + CONSUMER)
    sub.connect(f"tcp://127.0.0.1:{store_port}")
    deadline = time.monotonic() + 60
    while not sub.poll(10):  # warm-up: both directions connected
        if time.monotonic() > deadline:
            out.put(("error", "warm-up not answered within 60 s"))
            return
        pub.send(fetch_frame(WARM_SEQ, 0))
    while sub.poll(50):
        sub.recv_multipart()
    recv = sub.recv
    more = zmq.RCVMORE
    started = time.perf_counter()
    cpu = time.process_time()
    pub.send(fetch_frame(0, records))
    expected = 0
    count = 0
    while True:
        frame0 = recv()
        body = recv() if sub.getsockopt(more) else b""
        if codec:
            seq = decode_record(frame0)
            if seq != expected:
                raise RuntimeError(f"consumer: expected {expected}, got {seq}")
            expected = seq + 1
        count += 1
        if body[:1] == b"E":
            break
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu
    out.put(("consumer", count, elapsed, cpu))
    context.destroy(linger=0)


def run_catchup(records: int, size: int, codec: bool) -> Floor:
    """One FETCH of every record, answered by one store (``RuntimeError`` on failure)."""
    ctx = multiprocessing.get_context("spawn")
    to_store: Results = ctx.Queue()
    to_consumer: Results = ctx.Queue()
    out: Results = ctx.Queue()
    with tempfile.TemporaryDirectory(prefix="dafka-zmq-floor-") as tmp:
        path = str(Path(tmp) / "store.log")
        store = ctx.Process(
            target=fetch_store_process, args=(records, size, path, codec, to_store, out)
        )
        consumer = ctx.Process(target=consumer_process, args=(records, codec, to_consumer, out))
        store.start()
        consumer.start()
        got: dict[str, int] = dict(out.get(timeout=60) for _ in range(2))
        to_store.put(("consumer-port", got["consumer"]))
        to_consumer.put(("store-port", got["store"]))
        results = [out.get(timeout=400) for _ in range(2)]
        store.join(30)
        consumer.join(30)
    errors = [r for r in results if r[0] == "error"]
    if errors:
        raise RuntimeError(f"floor catch-up: {errors[0][1]}")
    _, n, elapsed, cpu = next(r for r in results if r[0] == "consumer")
    store_cpu = next(r[2] for r in results if r[0] == "store-done")
    cpu_us = {"store": store_cpu / n * 1e6, "consumer": cpu / n * 1e6}
    return Floor("catch-up 1 store", codec, n, size, n / elapsed, cpu_us)


def _pubsub_receiver(port_out: Results, messages: int, out: Results) -> None:
    """The SUB of :func:`run_pubsub`: reports its port, then per message what it measures:
    the count and the time of the last (throughput), or each latency (stamped messages)."""
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.RCVHWM, HWM)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    port = sub.bind_to_random_port("tcp://127.0.0.1")
    port_out.put((port,))
    recv = sub.recv
    while recv() != b"go":  # warm-up: the PUB repeats it until the SUB is connected
        pass
    port_out.put(("ready",))
    latencies: list[float] = []
    count = 0
    first = 0
    while count < messages:
        body = recv()
        if body == b"go":
            continue
        now = time.time_ns()
        if not count:
            first = now
        count += 1
        if body[:1] == b"t":
            latencies.append((now - SEQ.unpack_from(body, 1)[0]) / 1000)
    out.put((count, first, time.time_ns(), latencies))
    sub.close(0)
    ctx.term()


def run_pubsub(messages: int, size: int, rate: float = 0.0) -> tuple[float, list[float]]:
    """The plainest baseline: one PUB -> one SUB process on loopback, one message per send,
    no ACK, no disk, nothing decoded. ``rate`` 0: as fast as it goes, returns (messages/s,
    []); else at ``rate`` messages/s, each stamped, returns (rate, latencies in us)."""
    ctx = multiprocessing.get_context("spawn")
    ports: Results = ctx.Queue()
    out: Results = ctx.Queue()
    proc = ctx.Process(target=_pubsub_receiver, args=(ports, messages, out))
    proc.start()
    zctx = zmq.Context()
    pub = zctx.socket(zmq.PUB)
    pub.setsockopt(zmq.SNDHWM, HWM)
    try:
        pub.connect(f"tcp://127.0.0.1:{ports.get(timeout=60)[0]}")
        deadline = time.monotonic() + 30
        while ports.empty():  # "go" until the SUB took one: then it is connected
            if not proc.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("pub/sub floor: the SUB process never connected")
            pub.send(b"go")
            time.sleep(0.01)
        send = pub.send
        payload = b"x" * size
        if rate <= 0:
            started = time.time_ns()
            for _ in range(messages):
                send(payload)
        else:
            padding = b"x" * max(0, size - 1 - SEQ.size)
            interval = 1.0 / rate
            next_at = time.monotonic()
            for _ in range(messages):
                send(b"t" + SEQ.pack(time.time_ns()) + padding)
                next_at += interval
                delay = next_at - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
        count, _first, last, latencies = out.get(timeout=300)
    finally:
        pub.close(0)
        zctx.term()
        proc.join(30)
    if rate <= 0:
        return count / ((last - started) / 1e9), []
    return rate, sorted(latencies)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=100, help="body bytes (frame 1)")
    parser.add_argument("--repeat", type=int, default=1, help="run every scenario N times")
    parser.add_argument("--skip", default="", help="comma-separated: produce, catchup, raw, codec")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    codecs = [c for c, name in ((False, "raw"), (True, "codec")) if name not in skip]
    print(f"pyzmq {zmq.pyzmq_version()}, libzmq {zmq.zmq_version()}, load {_load()}")
    for _ in range(args.repeat):
        for codec in codecs:
            if "produce" not in skip:
                print(run_produce(args.records, args.size, codec).line(), flush=True)
            if "catchup" not in skip:
                print(run_catchup(args.records, args.size, codec).line(), flush=True)


if __name__ == "__main__":
    main()
