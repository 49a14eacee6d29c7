"""Quick start: a local cluster, a producer and a consumer, all in one script.

Run it with ``.venv/bin/python examples/quickstart.py``; the test suite runs it too.
In production the tower and the stores are separate daemons (``dafka tower``,
``dafka store --data DIR``) and clients name the tower with ``TransportConfig``.
"""

from __future__ import annotations

import tempfile

from dafka.client import Consumer, Producer, Record
from dafka.node import ConsumerConfig
from dafka.server import LocalCluster


def main(count: int = 1000) -> int:
    with tempfile.TemporaryDirectory() as data, LocalCluster(data, stores=1) as cluster:
        with Producer("greetings", cluster.transport) as producer:
            for i in range(count):
                producer.publish(f"hello #{i}".encode())
            if not producer.flush(timeout=30):
                raise SystemExit("the store did not acknowledge every record")
        # A consumer that starts after the producer is gone reads it all from the store.
        earliest = ConsumerConfig(offset_reset="earliest")
        with Consumer("greetings", transport=cluster.transport, config=earliest) as consumer:
            received: list[Record] = []
            while len(received) < count:
                batch = consumer.poll(timeout=30)
                if not batch:
                    raise SystemExit(f"stalled after {len(received)} records")
                received.extend(batch)
    print(f"received {len(received)} records; last: {received[-1].value.decode()}")
    return len(received)


if __name__ == "__main__":
    main()
