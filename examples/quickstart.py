"""Quick start: a local cluster, a producer and a consumer, all in one script.

Run it with ``.venv/bin/python examples/quickstart.py``; the test suite runs it too.
In production the tower and the stores are separate daemons (``dafka tower``,
``dafka store --data DIR``) and clients name the towers with ``towers="host:port,..."``.
"""

from __future__ import annotations

from dafka import Consumer, LocalCluster, Producer, Record


def main(count: int = 1000) -> int:
    with LocalCluster(stores=1) as cluster:
        with Producer("greetings", towers=cluster.towers, partitions=2) as producer:
            futures = [
                producer.send(f"hello #{i}".encode(), key=b"user-%d" % (i % 10))
                for i in range(count)
            ]
            if producer.flush(timeout=30):
                raise SystemExit("the store did not acknowledge every message")
            last = futures[-1].result()
            print(f"stored {count} messages; the last at {last.partition}:{last.offset}")
        # A consumer that starts after the producer is gone reads it all from the store.
        with Consumer("greetings", towers=cluster.towers, offset_reset="earliest") as consumer:
            received: list[Record] = []
            while len(received) < count:
                batch = consumer.poll(timeout=30)
                if not batch:
                    raise SystemExit(f"stalled after {len(received)} messages")
                received.extend(batch)
    mine = [r.value.decode() for r in received if r.key == last_key(count)]
    print(f"received {len(received)} messages; last of its key: {mine[-1]}")
    return len(received)


def last_key(count: int) -> bytes:
    return b"user-%d" % ((count - 1) % 10)


if __name__ == "__main__":
    main()
