"""The chaos soak's "named-producer restart while a store lags" operation (issue 18, path 1),
on its own timer.

What found the bug: a named producer restarted while one of two stores was still catching up
settled its resume on the first store that answered, the lagging one, reused sequences the
other store held, and the messages it then sent were acknowledged and kept by no store.

Each run of the operation, during the soak (stores and the tower killed around it):

1. waits until both stores hold everything the named producer has had acknowledged so far
   (asked over the wire; a store that alone holds the newest records and is then away for a
   whole resume cannot be consulted - docs/client.md - and the soak does not inject that);
2. SIGKILLs one store (the one that will lag) and runs a generation of the named producer
   (``cluster_client.py produce-named``, one unbatched partition, contents tagged with the
   generation) that stores 2,000-20,000 records in the other store alone;
3. restarts the killed store on its data directory - it is now behind and catches up - and
   starts the next generation right then; in half of the runs the store that is ahead is
   paused (SIGSTOP) for up to ``STALL`` seconds from that moment, as a busy store answers
   late, so that the lagging store answers first;
4. that generation publishes 200-2,000 records and flushes.

A generation must resume exactly where the acknowledged records end (before: behind them;
a gap would be records skipped). At the end (:meth:`finish`, with the stores up) a bounded
consumer reads the partition back: every record once, in order, each with the content of the
generation that sent it; and (:meth:`check_logs`) both stores hold that same log.
"""

from __future__ import annotations

import random
import signal
import time

from tests.integration.cluster.cluster_client import named_payload
from tests.integration.cluster.cluster_probe import HeadsProbe
from tests.integration.cluster.cluster_procs import Proc, Processes, StoreProc, TowerProc

from dafka import Consumer

TOPIC = "chaos-named"
NAME = "restarter"
PARTITION = f"{NAME}.0"
STALL = 0.5
"""Seconds the store that is ahead stays paused once a generation starts (or until the
generation resumed); the generation's settle window is 1.5 s (beacons every second)."""
BEACONS = "1.0"

Key = tuple[str, str]


class NamedRestart:
    """The operation: :meth:`run` once per tick, :meth:`finish` and :meth:`check_logs` at the
    end, :meth:`report` for the summary; ``failures`` says what went wrong."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self.generations: list[tuple[str, int, int]] = []
        """(tag, first sequence, end) of every generation, in order."""
        self.end = 0
        """The sequence after the last acknowledged one."""
        self.runs = 0
        self.stalled = 0
        self.backwards = 0
        self.gaps = 0
        self.lost = 0
        self.duplicated = 0
        self.reordered = 0
        self.read_back = 0
        self.failures: list[str] = []

    def run(self, procs: Processes, stores: list[StoreProc], tower: TowerProc) -> None:
        rng = self._rng
        if not self._converged(stores, tower):
            self.failures.append(f"run {self.runs}: the stores did not converge on {TOPIC}")
            return
        self.runs += 1
        lagging = rng.randrange(len(stores))
        ahead = stores[1 - lagging]
        stores[lagging].proc.kill()
        self._finish_generation(self._spawn(procs, tower, rng.randrange(2_000, 20_000)))
        trigger = self._spawn(procs, tower, rng.randrange(200, 2_000), wait_line=True)
        trigger.wait_event("waiting")
        stall = rng.random() < 0.5
        if stall:
            ahead.proc.send_signal(signal.SIGSTOP)  # it will answer late: the lagging one first
        try:
            stores[lagging] = procs.store(stores[lagging].data_dir, [tower], fsync="ms:5")
            trigger.send_line("go")
            if stall:
                self.stalled += 1
                until = time.monotonic() + STALL
                while time.monotonic() < until and trigger.last("resumed") is None:
                    time.sleep(0.01)
        finally:
            if stall:
                ahead.proc.send_signal(signal.SIGCONT)
        self._finish_generation(trigger)

    def _converged(self, stores: list[StoreProc], tower: TowerProc) -> bool:
        if not self.end:
            return True
        probe = HeadsProbe([tower.sub_endpoint])
        try:
            want = {PARTITION: self.end - 1}
            return all(
                probe.heads(s.reader_port, TOPIC, want, timeout=60.0).get(PARTITION) == self.end - 1
                for s in stores
            )
        finally:
            probe.close()

    def _spawn(
        self, procs: Processes, tower: TowerProc, records: int, *, wait_line: bool = False
    ) -> Proc:
        tag = f"g{len(self.generations)}"
        self.generations.append((tag, -1, -1))
        extra = ["--wait-line"] if wait_line else []
        return procs.client(
            f"named-{tag}",
            "produce-named",
            [tower],
            TOPIC,
            "--name",
            NAME,
            "--tag",
            tag,
            "--records",
            str(records),
            "--beacon-interval",
            BEACONS,
            "--flush-timeout",
            "300",
            *extra,
        )

    def _finish_generation(self, proc: Proc) -> None:
        code = proc.wait_exit(600)
        done = proc.last("done")
        tag = self.generations[-1][0]
        if code != 0 or done is None or not done["flushed"] or not done["in_order"]:
            self.failures.append(f"generation {tag}: exit {code}, {done}")
            if done is None:
                self.generations.pop()
                return
        start, end = int(done["start"]), int(done["start"]) + int(done["acked"])
        if start < self.end:  # a store keeps one content per sequence: one run's is lost
            self.backwards += 1
            self.lost += min(end, self.end) - start
            self.failures.append(
                f"generation {tag} resumed at {start:,}, behind {self.end:,} acknowledged"
            )
        elif start > self.end:
            self.gaps += 1
            self.failures.append(f"generation {tag} resumed at {start:,}, after {self.end:,}")
        self.generations[-1] = (tag, start, end)
        self.end = max(self.end, end)

    def expected(self) -> dict[int, bytes]:
        """Sequence -> the content of the last generation acknowledged there."""
        out: dict[int, bytes] = {}
        for tag, start, end in self.generations:
            for sequence in range(start, end):
                out[sequence] = named_payload(sequence, tag)
        return out

    def finish(self, towers: str) -> None:
        """Read the partition back through a consumer (the stores are up)."""
        if not self.end:
            return
        expected = self.expected()
        key = (TOPIC, PARTITION)
        position = 0
        with Consumer(
            assign={key: 0},
            end_offsets={key: self.end},
            towers=towers,
            advertised_host="127.0.0.1",
            bind_host="127.0.0.1",
            beacon_interval=0.2,
        ) as consumer:
            for columns in consumer.read_to_end(idle_timeout=120.0):
                for offset, value in zip(columns.offsets, columns.values, strict=True):
                    self.read_back += 1
                    if offset < position:  # behind: seen already, or out of order
                        if value == expected.get(offset):
                            self.duplicated += 1
                        else:
                            self.reordered += 1
                        continue
                    self.lost += offset - position  # skipped
                    self.lost += value != expected.get(offset)  # not what was acknowledged
                    position = offset + 1
        self.lost += max(0, self.end - position)

    def check_logs(self, logs: list[dict[Key, list[tuple[int, bytes]]]]) -> None:
        """Both stores (stopped) hold the partition whole, each record from its generation."""
        if not self.end:
            return
        held = [log.get((TOPIC, PARTITION), []) for log in logs]
        if held[0] != held[1]:
            self.failures.append(f"the stores did not converge on {TOPIC}")
        want = sorted(self.expected().items())
        for i, records in enumerate(held):
            wrong = sum(a != b for a, b in zip(records, want, strict=False))
            if len(records) != len(want) or wrong:
                self.failures.append(
                    f"store {i} holds {len(records):,} records of {TOPIC} "
                    f"(expected {len(want):,}), {wrong:,} of them not the acknowledged content"
                )
        if self.lost or self.duplicated or self.reordered:
            self.failures.append(f"read back: {self.report()}")

    def report(self) -> str:
        return (
            f"{self.runs} restarts while a store lagged ({self.stalled} with the store ahead "
            f"answering late), {len(self.generations)} generations, {self.end:,} records: "
            f"{self.backwards} resumed behind, {self.gaps} with a gap; {self.read_back:,} read "
            f"back, {self.lost} lost, {self.duplicated} duplicated, {self.reordered} reordered"
        )


__all__ = ["NamedRestart"]
