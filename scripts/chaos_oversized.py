"""The chaos soak's "oversized messages" operation (issue 18, path 5), on its own timer.

What found the bug: one message over the size limit, or a field out of its wire range,
poisoned a partition or a producer. Here, every few seconds during the soak (stores and the
tower killed around it):

* our producer (``max_message_bytes = LIMIT``) is handed a message over the limit and one
  with ``timestamp=2**70``: each must be refused at the call (``MessageTooLargeError``,
  ``ValueError``), and the message it sends next must be stored;
* a *foreign* producer (a ``PartitionProducer`` with the default 64 MiB limit: to the stores
  what a C producer is) publishes a RECORD over the stores' limit and then a small one: the
  stores keep a drop notice in its place, and the partition must go on.

The stores get the same limit (``DAFKA_MAX_MESSAGE_BYTES`` in their environment, set by
:func:`configure_stores` before they start: the chaos topic's records are far smaller). At
the end: every message our producer sent and every small foreign RECORD is stored
(ACKed); a consumer that read the topic live during the whole run and one that reads it
afterwards from the stores got exactly those, in order, each once, and both skipped every
oversized RECORD (``oversized_records``); both stores hold the same log of the topic.
"""

from __future__ import annotations

import logging
import os
import random
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from tests.integration.cluster.cluster_procs import BEACON_INTERVAL

from dafka import Consumer, MessageTooLargeError, Producer, RecordMetadata
from dafka.client import PartitionProducer
from dafka.records import CorruptBatchError, DroppedRecordError, check_batch
from dafka.transport.config import TransportConfig

LIMIT = 64 * 1024
"""``max_message_bytes`` of the stores and of our clients in this operation."""
TOPIC = "chaos-oversized"

Key = tuple[str, str]


def configure_stores() -> None:
    """Give every ``dafka store`` started from now on the operation's limit."""
    os.environ["DAFKA_MAX_MESSAGE_BYTES"] = str(LIMIT)


class OversizedMessages:
    """The operation: :meth:`run` once per tick, :meth:`poll` often, :meth:`finish` once."""

    def __init__(self, towers: str, rng: random.Random, log_dir: Path) -> None:
        """``log_dir``: where the operation's clients log (``oversized.log``), not the
        soak's output (they hear the hostile node too)."""
        handler = logging.FileHandler(log_dir / "oversized.log")
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
        dafka_log = logging.getLogger("dafka")
        dafka_log.addHandler(handler)
        dafka_log.propagate = False
        self._rng = rng
        self._towers = towers
        self._beacon = beacon_interval = float(BEACON_INTERVAL)
        joining: dict[str, Any] = {"towers": towers, "beacon_interval": beacon_interval}
        self._live = Consumer(TOPIC, offset_reset="earliest", max_message_bytes=LIMIT, **joining)
        self._ours = Producer(TOPIC, max_message_bytes=LIMIT, linger_ms=1, **joining)
        self._foreign = PartitionProducer(
            TOPIC, TransportConfig.for_towers(towers, beacon_interval=beacon_interval)
        )
        self._futures: list[Future[RecordMetadata]] = []
        self._expected: list[bytes] = []
        """The small messages, in the order each producer sent them (two partitions)."""
        self._seen: list[tuple[str, int, bytes]] = []
        self.runs = 0
        self.refused = 0
        """Our producer's refusals at the call (size and timestamp)."""
        self.foreign_oversized = 0
        self.live_oversized: int | None = None
        self.late_oversized: int | None = None
        """RECORDs the live and the late consumer skipped for their size (at the end)."""
        self.notices: list[int] = []
        """Drop notices each store holds in the topic (at the end)."""
        self.failures: list[str] = []

    def run(self) -> None:
        """One tick: an oversized and an out-of-range send refused, an oversized foreign
        RECORD published; a small message after each."""
        self.runs += 1
        n = self.runs
        try:
            self._ours.send(bytes(LIMIT + self._rng.randrange(0, LIMIT)))
            self.failures.append(f"tick {n}: our producer queued a message over the limit")
        except MessageTooLargeError:
            self.refused += 1
        try:
            self._ours.send(b"bad timestamp", timestamp=2**70)
            self.failures.append(f"tick {n}: our producer queued a timestamp of 2**70")
        except ValueError:
            self.refused += 1
        small = b"ours-%d" % n
        self._futures.append(self._ours.send(small))
        self._expected.append(small)
        self._foreign.publish(bytes(LIMIT + 1 + self._rng.randrange(0, 3 * LIMIT)))
        self.foreign_oversized += 1
        small = b"foreign-%d" % n
        self._foreign.publish(small)
        self._expected.append(small)

    def poll(self) -> None:
        """Take what the live consumer has (called between ticks)."""
        self._seen += [(r.partition, r.offset, r.value) for r in self._live.poll(timeout=0)]

    def finish(self) -> None:
        """Wait for every ACK, read the topic live and late, compare; fills ``failures``."""
        if self._ours.flush(300):
            self.failures.append("our producer: messages not stored within 300 s")
        for future in self._futures:
            if future.exception(timeout=0) is not None:
                self.failures.append(f"our producer: a small message failed: {future.exception()}")
                break
        if not self._foreign.flush(300):
            self.failures.append(
                f"foreign producer: {self._foreign.acked} of {self._foreign.next_sequence} "
                "RECORDs ACKed in 300 s (a partition wedged?)"
            )
        self._ours.close()
        self._foreign.close()
        wanted = len(self._expected)
        deadline = time.monotonic() + 120
        while len(self._seen) < wanted and time.monotonic() < deadline:
            self._seen += [(r.partition, r.offset, r.value) for r in self._live.poll(timeout=0.5)]
        live_oversized = self._live.poll_statistics().oversized_records
        self._live.close()
        late: list[tuple[str, int, bytes]] = []
        with Consumer(
            TOPIC,
            towers=self._towers,
            beacon_interval=self._beacon,
            offset_reset="earliest",
            max_message_bytes=LIMIT,
        ) as consumer:
            deadline = time.monotonic() + 120
            while len(late) < wanted and time.monotonic() < deadline:
                late += [(r.partition, r.offset, r.value) for r in consumer.poll(timeout=0.5)]
            late_oversized = consumer.poll_statistics().oversized_records
        self.live_oversized, self.late_oversized = live_oversized, late_oversized
        if sorted(self._seen) != sorted(late):
            self.failures.append("the live and the late consumer disagree")
        for name, got in (("live", self._seen), ("late", late)):
            if sorted(v for _, _, v in got) != sorted(self._expected):
                self.failures.append(
                    f"{name} consumer: {len(got)} small messages, expected {wanted} "
                    f"(missing {sorted(set(self._expected) - {v for _, _, v in got})[:5]})"
                )
            for partition in {p for p, _, _ in got}:
                mine = [(o, v) for p, o, v in got if p == partition]
                if mine != sorted(mine) or len({o for o, _ in mine}) != len(mine):
                    self.failures.append(f"{name} consumer: {partition} out of order or twice")
        for name, count in (("live", live_oversized), ("late", late_oversized)):
            if count != self.foreign_oversized:
                self.failures.append(
                    f"{name} consumer skipped {count} oversized RECORDs, expected "
                    f"{self.foreign_oversized}"
                )

    def check_logs(self, logs: list[dict[Key, list[tuple[int, bytes]]]]) -> None:
        """The stores' logs (stopped): the same for the topic, a notice per oversized RECORD."""
        mine = [{k: v for k, v in log.items() if k[0] == TOPIC} for log in logs]
        if any(m != mine[0] for m in mine):
            self.failures.append(f"the stores did not converge on {TOPIC}")
        for log in mine:
            held = [content for records in log.values() for _, content in records]
            self.notices.append(sum(1 for c in held if _is_notice(c)))
            if any(len(c) > LIMIT for c in held):
                self.failures.append("a store holds a RECORD over the limit")
        if any(n != self.foreign_oversized for n in self.notices):
            self.failures.append(
                f"drop notices per store {self.notices}, expected {self.foreign_oversized}"
            )

    def report(self) -> str:
        return (
            f"{self.runs} ticks: {self.refused} sends refused at the call (over {LIMIT:,} B, "
            f"timestamp 2**70); {self.foreign_oversized} foreign RECORDs over the limit kept "
            f"as drop notices (per store {self.notices}), skipped by the live and the late "
            f"consumer ({self.live_oversized}, {self.late_oversized})"
        )


def _is_notice(content: bytes) -> bool:
    try:
        check_batch(content)
    except DroppedRecordError:
        return True
    except CorruptBatchError:
        return False
    return False


__all__ = ["LIMIT", "TOPIC", "OversizedMessages", "configure_stores"]
