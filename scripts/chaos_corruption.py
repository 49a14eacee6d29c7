"""The chaos soak's "single-store corruption with a consumer reading through it" operation
(issue 18, path 4).

What found the bug: a 3-byte flip in the middle of a segment cost the 10,000 intact records
after it, and a consumer reading through it waited forever. Here, during the soak (stores
and the tower killed around it), the operation SIGKILLs one store, flips 3 bytes inside a
random record of its log that *both* stores held durably (below both durable heads, asked
over the wire: a record only the damaged store held would be a real loss, which the soak
does not inject), restarts it, and reads the partition from 0 to past that record with a
fresh bounded consumer whose FETCHes every store answers (``single_store_fetch=False``: the
damaged store's own read must meet the damage). The store keeps the records after the
damaged one, fills the hole from the other store, and the reader gets every record once, in
order, with its content; a ``DataLossError`` or a missing record counts as lost. At the end
the stores' logs must show each damage found and repaired, and both stores must hold
identical complete logs (the soak's own check).
"""

from __future__ import annotations

import random
import re
import time

from tests.integration.cluster.cluster_client import payload
from tests.integration.cluster.cluster_probe import HeadsProbe
from tests.integration.cluster.cluster_procs import Processes, StoreProc, TowerProc

from dafka import Consumer, DataLossError
from dafka.storage import directory_name


class Corruption:
    """The operation: :meth:`run` once per tick, :meth:`read_store_logs` and :meth:`report`
    at the end; ``topic``: the soak's topic (written by its producers)."""

    RECORD_BYTES = 116  # cluster_client payloads (100 B) and their 16-byte record header
    DAMAGE = re.compile(r"partition '\S+'/'\S+' damaged \(corrupt")
    FILLED = re.compile(r"records \d+\.\.\d+ filled from a peer")

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.done = 0
        self.checked = 0
        self.lost = 0
        self.duplicated = 0
        self.skipped = 0
        self.found = 0
        self.filled = 0

    def run(
        self,
        procs: Processes,
        stores: list[StoreProc],
        tower: TowerProc,
        towers: str,
        rng: random.Random,
    ) -> None:
        probe = HeadsProbe([tower.sub_endpoint])
        try:
            listen = {"": -2}  # a head no store has: listen the whole time, take every answer
            per_store = [
                probe.heads(s.reader_port, self.topic, listen, timeout=3.0) for s in stores
            ]
        finally:
            probe.close()
        held = {
            p: min(h.get(p, -1) for h in per_store)
            for p in set().union(*per_store)
            if min(h.get(p, -1) for h in per_store) >= 100
        }
        if not held:
            self.skipped += 1  # nothing both stores hold yet
            return
        partition = rng.choice(sorted(held))
        victim = rng.randrange(10, held[partition] - 10)
        i = rng.randrange(len(stores))
        store = stores[i]
        store.proc.kill()
        folder = (
            store.data_dir
            / "log"
            / directory_name(self.topic, "topic")
            / directory_name(partition, "partition")
        )
        bases = sorted(int(p.stem) for p in folder.glob("*.log") if int(p.stem) <= victim)
        segment = folder / f"{bases[-1]:020d}.log"
        at = 24 + (victim - bases[-1]) * self.RECORD_BYTES + 16 + rng.randrange(97)
        data = bytearray(segment.read_bytes())
        data[at : at + 3] = bytes(b ^ 0x5A for b in data[at : at + 3])
        segment.write_bytes(bytes(data))
        self.done += 1
        stores[i] = procs.store(store.data_dir, [tower], fsync="ms:5")
        end = min(held[partition] + 1, victim + 200)
        self._read_through(towers, partition, end)

    def _read_through(self, towers: str, partition: str, end: int) -> None:
        key = (self.topic, partition)
        expected = 0
        try:
            with Consumer(
                assign={key: 0},
                end_offsets={key: end},
                towers=towers,
                advertised_host="127.0.0.1",
                bind_host="127.0.0.1",
                beacon_interval=0.2,
                single_store_fetch=False,
                fail_on_data_loss=True,
            ) as consumer:
                for columns in consumer.read_to_end(idle_timeout=120.0):
                    for offset, value in zip(columns.offsets, columns.values, strict=True):
                        if offset < expected:
                            self.duplicated += 1
                            continue
                        self.lost += offset - expected
                        if value != payload(offset):
                            self.lost += 1
                        expected = offset + 1
                        self.checked += 1
        except DataLossError as exc:
            print(f"{time.strftime('%H:%M:%S')} corruption: {exc}", flush=True)
        self.lost += max(0, end - expected)

    def read_store_logs(self, text: str) -> None:
        """Count the damage the stores logged and the fills from a peer that repaired it."""
        self.found = len(self.DAMAGE.findall(text))
        self.filled = len(self.FILLED.findall(text))

    def report(self) -> str:
        skipped = f" ({self.skipped} skipped: nothing both stores held)" if self.skipped else ""
        return (
            f"{self.done} records flipped (3 bytes) in one store's copy and read through: "
            f"{self.checked} records read back, {self.lost} lost, {self.duplicated} duplicated; "
            f"stores logged {self.found} damaged records and {self.filled} fills from a peer"
            f"{skipped}"
        )


__all__ = ["Corruption"]
