"""An event producer process: sends its share of the sensor feed into the input topic.

``python -m dafka.pipeline feed CONFIG_JSON``: the feed is split over ``producers`` processes
by device (a device always talks to the same gateway, so its readings stay in order); each
process sends the messages of its devices, paced on the *global* feed position so that all
producers move through event time together (``rate`` messages per second in all, 0 = as fast
as possible). It reports on stdout, one JSON object per line: ``{"type": "progress", ...}``
every ``report_every`` seconds and ``{"type": "done", "sent": n, "heads": {partition:
next_offset}}`` once every message it sent is stored. SIGTERM or SIGINT stop it early (the
forever mode): it stops sending, waits for the stores' ACKs, and reports ``done`` all the same.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from types import FrameType

from dafka.config import PLAINTEXT, KeyFiles
from dafka.pipeline._workload import Message, WorkloadSpec, generate


@dataclass(frozen=True)
class FeedConfig:
    towers: str
    topic: str
    spec: WorkloadSpec
    producers: int
    producer: int  # which share this process sends (0..producers-1)
    name: str  # the producer's name: its partitions are name.0, name.1...; unique per run
    partitions: int  # partitions of this producer (a device's readings go to one of them)
    rate: float  # messages per second for all producers together; 0 = unpaced
    start_at: float  # wall time (time.time()) of feed position 0: one schedule for all
    report_every: float = 0.5
    forever: bool = False  # repeat the feed with fresh seeds until stopped
    security: KeyFiles = PLAINTEXT

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> FeedConfig:
        data = json.loads(text)
        data["spec"] = WorkloadSpec(**data["spec"])
        data["security"] = KeyFiles(**data.get("security", {}))
        return cls(**data)


def share_of(key: bytes, producers: int) -> int:
    """Which producer sends the messages of a device (a stable hash of its key)."""
    return zlib.crc32(key) % producers


def feed(spec: WorkloadSpec, forever: bool) -> Iterator[Message]:
    """The feed; in forever mode, round after round, each with the next seed and later times."""
    yield from generate(spec)
    if not forever:
        return
    offset = 0
    rounds = 1
    span = spec.readings * spec.step_ms
    while True:
        offset += spec.readings
        shifted = WorkloadSpec(
            **{
                **asdict(spec),
                "seed": spec.seed + rounds,
                "start_ms": spec.start_ms + rounds * span,
            }
        )
        rounds += 1
        for message in generate(shifted):
            yield Message(
                message.index + offset, message.key, message.value, message.kind, message.reading
            )


def _emit(**fields: object) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def run(config: FeedConfig) -> int:
    from dafka import Producer, RecordMetadata

    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    _emit(type="ready")  # the runner's SIGTERM now stops the feed (before, it killed us)
    heads: dict[str, int] = {}  # partition -> next offset, from the delivery reports
    failures: list[BaseException] = []

    def delivered(meta: RecordMetadata | None, error: BaseException | None) -> None:
        if meta is not None:
            heads[meta.partition] = max(heads.get(meta.partition, 0), meta.offset + 1)
        elif error is not None:
            failures.append(error)

    sent = 0
    behind = 0.0  # how far the producer fell behind the schedule, at most (seconds)
    next_report = time.monotonic()
    with Producer(
        config.topic,
        towers=config.towers,
        **config.security.fields(),
        name=config.name,
        partitions=config.partitions,
        on_delivery=delivered,
    ) as producer:
        for message in feed(config.spec, config.forever):
            if stop.is_set():
                break
            if share_of(message.key, config.producers) != config.producer:
                continue
            if config.rate > 0:
                delay = config.start_at + message.index / config.rate - time.time()
                if delay > 0 and stop.wait(delay):
                    break
                behind = max(behind, -delay)
            producer.send(message.value, key=message.key)
            sent += 1
            now = time.monotonic()
            if now >= next_report:
                _emit(
                    type="progress",
                    sent=sent,
                    acked=producer.delivered,
                    index=message.index,
                    behind=round(behind, 3),
                )
                next_report = now + config.report_every
        while producer.flush(timeout=config.report_every):
            _emit(type="progress", sent=sent, acked=producer.delivered, index=-1, behind=behind)
        if failures:
            raise failures[0]
        _emit(type="progress", sent=sent, acked=producer.delivered, index=-1, behind=behind)
        _emit(type="done", sent=sent, heads=heads, behind=round(behind, 3))
    return 0


__all__ = ["FeedConfig", "feed", "run", "share_of"]
