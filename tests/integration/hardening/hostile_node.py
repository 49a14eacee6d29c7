"""A hostile node: for a bounded time, sends junk to every socket of a cluster it can reach.

    python hostile_node.py --tower HOST:SUB:PUB --seconds 20 [--seed 1]

It joins like a node (it listens to the tower's beacons to learn every data endpoint), then
in a loop, as fast as the 2 shared cores allow at a modest rate:

* **beacons** to the tower: hosts nobody can connect to (``my host``, ``*``, ``ipc://x``,
  non-UTF-8, 300 bytes), ports 0, 70000, ``-1``, garbage, wrong frame counts - and valid
  beacons for its own data socket under fresh random ids, so that every node connects to it;
* **subscriptions** on every data PUB it learned: ``L`` + a 256-byte id (the notice that
  killed a store answering with STORE-HELLO), ``L`` + NUL, random prefixes, unsubscribes;
* **data frames** from its own XPUB to whoever connected: every prefix a node subscribed
  to, followed by mutated encodings of every message class (``dafka.protocol.fuzzing``),
  pure junk, and well-formed messages for random partitions.

It never uses a real node's id (spoofing a producer is an authentication matter, out of
scope): what it shows is that no malformed or unexpected input can crash a node. It prints
one JSON line at the end with what it sent.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time

import zmq

from dafka.protocol import Fetch, GetHeads, Head, Message, Record, encode
from dafka.protocol.fuzzing import mutate, random_frames, seed_corpus

BAD_HOSTS = [b"my host", b"*", b"ipc://x", b"\xff\xfe\xfd", b"a" * 300, b"tcp://1.2.3.4", b"::"]
BAD_PORTS = [b"0", b"70000", b"-1", b"abc", b"", b"99999999999", b"08"]


def _rid(rng: random.Random) -> str:
    return "".join(rng.choice("0123456789ABCDEF") for _ in range(32))


class Hostile:
    def __init__(self, towers: list[str], seed: int) -> None:
        self.rng = random.Random(seed)
        self.ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.beacon_pubs: list[zmq.Socket[bytes]] = []
        self.beacon_sub: zmq.Socket[bytes] = self._socket(zmq.SUB)
        self.beacon_sub.setsockopt(zmq.SUBSCRIBE, b"")
        for tower in towers:
            host, sub, pub = tower.split(":")
            beacon_pub = self._socket(zmq.PUB)
            beacon_pub.connect(f"tcp://{host}:{sub}")
            self.beacon_pubs.append(beacon_pub)
            self.beacon_sub.connect(f"tcp://{host}:{pub}")
        self.data: zmq.Socket[bytes] = self._socket(zmq.XPUB)
        self.data.setsockopt(zmq.XPUB_VERBOSE, 1)
        self.data.bind("tcp://127.0.0.1:*")
        endpoint = self.data.getsockopt_string(zmq.LAST_ENDPOINT)
        self.port = int(endpoint.rsplit(":", 1)[1])
        self.peers: dict[str, zmq.Socket[bytes]] = {}
        self.prefixes: set[bytes] = set()
        self.corpus = seed_corpus()
        self.sent = {"beacons": 0, "subscriptions": 0, "data": 0, "peers": 0}

    def _socket(self, kind: int) -> zmq.Socket[bytes]:
        sock: zmq.Socket[bytes] = self.ctx.socket(kind)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.SNDHWM, 10_000)
        return sock

    def run(self, seconds: float, rate: float) -> None:
        end = time.monotonic() + seconds
        step = 1.0 / rate
        while time.monotonic() < end:
            self._learn()
            choice = self.rng.random()
            if choice < 0.3:
                self._beacon()
            elif choice < 0.5:
                self._subscribe()
            else:
                self._data()
            time.sleep(step)

    def _learn(self) -> None:
        while True:
            try:
                frames = self.beacon_sub.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            if len(frames) == 3 and frames[0] == b"B":
                endpoint = frames[2].decode("ascii", "replace")
                if endpoint not in self.peers and not endpoint.endswith(f":{self.port}"):
                    sub = self._socket(zmq.SUB)
                    try:
                        sub.connect(endpoint)
                    except zmq.ZMQError:
                        sub.close()
                        continue
                    self.peers[endpoint] = sub
                    self.sent["peers"] += 1
        while True:
            try:
                notice = self.data.recv(zmq.NOBLOCK)
            except zmq.Again:
                break
            if notice[:1] == b"\x01" and len(self.prefixes) < 200:
                self.prefixes.add(notice[1:])

    def _beacon(self) -> None:
        rng = self.rng
        pick = rng.randrange(4)
        if pick == 0:  # a valid beacon for our own data socket: nodes connect to us
            frames = [b"B", _rid(rng).encode(), b"127.0.0.1", str(self.port).encode()]
        elif pick == 1:
            frames = [b"B", _rid(rng).encode(), rng.choice(BAD_HOSTS), b"5000"]
        elif pick == 2:
            frames = [b"B", _rid(rng).encode(), b"127.0.0.1", rng.choice(BAD_PORTS)]
        else:
            frames = [b"B", *random_frames(rng)]
        for pub in self.beacon_pubs:
            pub.send_multipart(frames)
        self.sent["beacons"] += 1

    def _subscribe(self) -> None:
        if not self.peers:
            return
        rng = self.rng
        sub = self.peers[rng.choice(sorted(self.peers))]
        prefix = rng.choice(
            [
                b"L" + b"a" * 256,
                b"L" + b"\x00" + rng.randbytes(8),
                b"L",
                b"L" + rng.randbytes(rng.randrange(1, 300)),
                rng.randbytes(rng.randrange(0, 40)),
            ]
        )
        option = zmq.SUBSCRIBE if rng.random() < 0.8 else zmq.UNSUBSCRIBE
        sub.setsockopt(option, prefix)
        self.sent["subscriptions"] += 1

    def _data(self) -> None:
        rng = self.rng
        pick = rng.randrange(4)
        if pick == 0:
            frames = mutate(rng.choice(self.corpus), rng)
        elif pick == 1:
            frames = random_frames(rng) or [b""]
        elif pick == 2:
            topic = "t" + str(rng.randrange(3))
            producer = _rid(rng)
            choices: list[Message] = [
                Record(topic, producer, rng.randrange(0, 1 << 64), b"x"),
                Head(topic, producer, rng.randrange(0, 1 << 64)),
                Fetch(producer, _rid(rng), topic, rng.randrange(1 << 64), 1 << 31),
                GetHeads(topic, _rid(rng)),
            ]
            frames = encode(rng.choice(choices))
        else:
            frames = mutate(rng.choice(self.corpus), rng)
        frames = frames or [b""]
        if self.prefixes and rng.random() < 0.7:  # get past the subscribers' filters
            frames = [rng.choice(sorted(self.prefixes)) + frames[0][1:], *frames[1:]]
        self.data.send_multipart(frames)
        self.sent["data"] += 1

    def close(self) -> None:
        self.ctx.destroy(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tower", action="append", required=True, help="HOST:SUBPORT:PUBPORT")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rate", type=float, default=400.0, help="hostile sends per second")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    hostile = Hostile(args.tower, args.seed)
    try:
        hostile.run(args.seconds, args.rate)
    finally:
        hostile.close()
    sys.stdout.write(json.dumps({"event": "done", **hostile.sent}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
