"""A forged ACK changes nothing for a producer with an ACL (issue 19): mallory, an authorized
key that may even produce to the topic, joins the cluster (a tower process) with real CURVE
sockets, greets alice's producer as a store (STORE-HELLO) and ACKs her records, with no
store running. Without permissions the producer believed it and reported unstored records
stored; with the ACL only store keys' ACKs and greetings count: her record stays in flight
and each forgery is a counted drop (``acl_refused``)."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import zmq

from dafka import Producer
from dafka.protocol import Ack, StoreHello, encode
from dafka.server import LocalCluster
from dafka.transport.security import Security, keygen
from tests.integration.cluster.cluster_procs import wait_until

ACL = """
stores = ["tower"]
[[grant]]
keys = ["alice", "mallory"]
produce = ["orders"]
consume = ["orders"]
"""


class Mallory:
    """A node that beacons through the tower and answers every producer that connects to
    its XPUB with a STORE-HELLO and ACKs of its partition's first sequences."""

    def __init__(self, security: Security, tower: str) -> None:
        self._context = zmq.Context()
        self._security = security
        self._tower = tower
        self._stop = threading.Event()
        self.greeted: list[str] = []
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Mallory:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()
        self._context.term()

    def _run(self) -> None:
        security = self._security
        xpub = self._context.socket(zmq.XPUB)
        beacon = self._context.socket(zmq.PUB)
        for sock in (xpub, beacon):
            sock.linger = 0
        xpub.curve_server = True
        xpub.curve_secretkey = security.secret_key
        xpub.curve_publickey = security.public_key
        port = xpub.bind_to_random_port("tcp://127.0.0.1")
        security.client(beacon, security.tower_key)
        beacon.connect(self._tower)
        producers: set[str] = set()
        try:
            while not self._stop.is_set():
                beacon.send_multipart([b"B", b"mallory-store", b"127.0.0.1", b"%d" % port])
                while xpub.poll(100):
                    notice = xpub.recv()
                    if notice[:2] == b"\x01L":
                        producers.add(notice[2:].decode())
                        self.greeted.append(notice[2:].decode())
                for producer in producers:
                    for frames in (
                        encode(StoreHello(producer, "mallory-store")),
                        encode(Ack(producer, "orders", 0)),
                    ):
                        xpub.send_multipart(frames)
        finally:
            xpub.close()
            beacon.close()


def test_a_forged_store_greeting_and_ack_release_nothing(tmp_path: Path) -> None:
    auth = tmp_path / "auth"
    auth.mkdir()
    secrets = {}
    for name in ("tower", "alice", "mallory"):
        public, secrets[name] = keygen(tmp_path / name)
        shutil.copy(public, auth)
    acl = tmp_path / "acl.toml"
    acl.write_text(ACL)
    with LocalCluster(
        tmp_path / "d", stores=0, beacon_interval=0.2, key=secrets["tower"], authorized_keys=auth
    ) as c:
        mallory_keys = Security.load(secrets["mallory"], auth)
        producer = Producer(
            "orders",
            towers=c.towers,
            beacon_interval=0.2,
            key=secrets["alice"],
            authorized_keys=auth,
            acl=acl,
        )
        try:
            with Mallory(mallory_keys, f"tcp://127.0.0.1:{c.port}") as mallory:
                producer.send(b"not stored anywhere")
                wait_until(lambda: mallory.greeted or None, "alice's producer to reach mallory")
                wait_until(
                    lambda: producer.transport_statistics().acl_refused >= 2 or None,
                    "the producer to refuse mallory's greeting and ACK",
                )
                assert producer.flush(timeout=1.0) == 1  # still in flight: no store has it
                assert producer.delivered == 0
        finally:
            producer.close(timeout=0)
