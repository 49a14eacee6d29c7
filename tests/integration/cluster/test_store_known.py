"""A store keeps the stores it counts (``stores-known``): a peer's garbage never reaches it."""

from __future__ import annotations

import time
from pathlib import Path

import zmq

from dafka.server import InProcessCluster


def test_a_garbage_store_subscription_neither_crashes_the_store_nor_lands_in_its_list(
    tmp_path: Path,
) -> None:
    """A hostile node's ``W`` subscription naming non-ASCII bytes crashed the store's thread
    when it wrote its list (UnicodeEncodeError; found by the chaos soak)."""
    with InProcessCluster(tmp_path, stores=1) as cluster:
        store = cluster.stores[0]
        assert store.runner is not None
        context = zmq.Context()
        subs = []
        try:
            for port in store.runner.ports:
                sub = context.socket(zmq.SUB)
                sub.setsockopt(zmq.LINGER, 0)
                sub.connect(f"tcp://127.0.0.1:{port}")
                sub.setsockopt(zmq.SUBSCRIBE, b"W\x17\xe9@\x95\xdcNR")
                sub.setsockopt(zmq.SUBSCRIBE, b"WPLAIN-STORE")
                subs.append(sub)
            known = store.data_dir / "stores-known"
            deadline = time.monotonic() + 30
            while not (known.exists() and "PLAIN-STORE" in known.read_text()):
                assert store.runner.failure.error is None, store.runner.failure.error
                assert time.monotonic() < deadline, "stores-known never written"
                time.sleep(0.05)
            assert known.read_text().split() == ["PLAIN-STORE"]
            assert store.runner.failure.error is None
        finally:
            for sub in subs:
                sub.close()
            context.term()
