"""The pipeline's input: a deterministic IoT sensor feed (pure: no clock, no I/O).

Each sensor reading is a JSON object ``{"event_id", "device", "ts", "temp"}`` (``ts`` the event
time in ms since the epoch, ``temp`` tenths of a degree Celsius, integers so that every
aggregate is exact). The feed is what real devices send: readings arrive out of order (a few
are *late*, up to ``max_lateness_ms`` behind the newest), some are sent twice (*duplicates*:
the same bytes again a little later, as a device that retries), and a few are *malformed*
(truncated JSON, a missing field, a string where a number belongs, an empty message,
invalid UTF-8). The same spec and seed always give the same messages, so the pipeline's
exact output is computable (:mod:`dafka.pipeline._expected`).

Event time advances by ``step_ms`` per reading, independent of the wall clock: how fast the
messages are produced changes nothing in the results.
"""

from __future__ import annotations

import heapq
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum

SITES = ("berlin", "lisbon", "oslo", "turin", "porto")
KINDS = ("freezer", "greenhouse", "server-room", "office")
BASELINE = {"freezer": -180, "greenhouse": 240, "server-room": 210, "office": 205}
"""Typical reading of each kind of device, in tenths of a degree."""


class Kind(Enum):
    """What a produced message is, as the generator made it (the truth the checks use)."""

    READING = "reading"
    DUPLICATE = "duplicate"
    MALFORMED = "malformed"


@dataclass(frozen=True)
class Device:
    """One row of the reference table the job enriches aggregates with."""

    device: str
    site: str
    kind: str


@dataclass(frozen=True)
class Reading:
    """A well-formed sensor reading (what the job's parser must recover)."""

    event_id: str
    device: str
    ts: int
    temp: int


@dataclass(frozen=True)
class Message:
    """One message to produce: its key, its bytes, and what it is."""

    index: int  # position in the feed (0, 1, 2...)
    key: bytes
    value: bytes
    kind: Kind
    reading: Reading | None  # None for a malformed message


@dataclass(frozen=True)
class WorkloadSpec:
    """The shape of the feed. Defaults: 1,000 readings per second of event time."""

    seed: int = 7
    readings: int = 18_000
    devices: int = 40
    start_ms: int = 1_767_225_600_000  # 2026-01-01T00:00:00Z
    step_ms: int = 1
    late_fraction: float = 0.03
    max_lateness_ms: int = 8_000
    duplicate_fraction: float = 0.02
    max_duplicate_delay: int = 500  # messages between a reading and its duplicate
    malformed_fraction: float = 0.004

    def __post_init__(self) -> None:
        if self.readings < 0 or self.devices < 1 or self.step_ms < 1:
            raise ValueError("readings >= 0, devices >= 1 and step_ms >= 1")
        for name in ("late_fraction", "duplicate_fraction", "malformed_fraction"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be within [0, 1]")
        if self.max_lateness_ms < 0 or self.max_duplicate_delay < 1:
            raise ValueError("max_lateness_ms >= 0 and max_duplicate_delay >= 1")

    @property
    def end_ms(self) -> int:
        """Event time of the last reading (before lateness)."""
        return self.start_ms + max(0, self.readings - 1) * self.step_ms


def reference_table(devices: int) -> list[Device]:
    """The devices' reference data: site and kind of each (a pure function of the count)."""
    return [
        Device(f"dev-{i:03d}", SITES[i % len(SITES)], KINDS[(i * 7 + i // len(SITES)) % 4])
        for i in range(devices)
    ]


def encode(reading: Reading) -> bytes:
    """The wire form of a reading (compact JSON, fixed key order)."""
    return json.dumps(
        {
            "event_id": reading.event_id,
            "device": reading.device,
            "ts": reading.ts,
            "temp": reading.temp,
        },
        separators=(",", ":"),
    ).encode()


def _malformed(rng: random.Random, reading: Reading) -> bytes:
    good = encode(reading)
    choice = rng.randrange(5)
    if choice == 0:
        return good[: rng.randrange(1, len(good) - 1)]  # truncated JSON
    if choice == 1:
        return json.dumps(
            {"event_id": reading.event_id, "device": reading.device, "temp": reading.temp}
        ).encode()  # no event time
    if choice == 2:
        return json.dumps(
            {
                "event_id": reading.event_id,
                "device": reading.device,
                "ts": reading.ts,
                "temp": "hot",
            }
        ).encode()  # not a number
    if choice == 3:
        return b""
    return b"\xff\xfe" + good[2:]  # invalid UTF-8


def generate(spec: WorkloadSpec) -> Iterator[Message]:
    """The feed, message by message, in the order it is produced.

    ``spec.readings`` distinct readings; on top of them duplicates (each a copy of an earlier
    reading, produced 1..``max_duplicate_delay`` messages after it) and malformed messages.
    """
    rng = random.Random(spec.seed)
    table = reference_table(spec.devices)
    pending: list[tuple[int, int, Message]] = []  # (due index, tie, duplicate to emit)
    index = 0
    tie = 0

    def flush_due(upto: int) -> Iterator[Message]:
        nonlocal index
        while pending and pending[0][0] <= upto:
            _, _, dup = heapq.heappop(pending)
            yield Message(index, dup.key, dup.value, Kind.DUPLICATE, dup.reading)
            index += 1

    for n in range(spec.readings):
        yield from flush_due(index)
        device = table[rng.randrange(len(table))]
        ts = spec.start_ms + n * spec.step_ms
        if spec.max_lateness_ms and rng.random() < spec.late_fraction:
            ts -= rng.randint(1, spec.max_lateness_ms)
        temp = BASELINE[device.kind] + rng.randint(-40, 40)
        reading = Reading(f"{spec.seed:x}-{n:08x}", device.device, ts, temp)
        message = Message(index, device.device.encode(), encode(reading), Kind.READING, reading)
        yield message
        index += 1
        if rng.random() < spec.duplicate_fraction:
            tie += 1
            heapq.heappush(
                pending, (index + rng.randint(0, spec.max_duplicate_delay - 1), tie, message)
            )
        if rng.random() < spec.malformed_fraction:
            yield Message(
                index, device.device.encode(), _malformed(rng, reading), Kind.MALFORMED, None
            )
            index += 1
    yield from flush_due(1 << 62)


def heartbeat(event_id: str, ts: int) -> bytes:
    """A message that only moves event time forward (no device: never aggregated).

    Sent once every reading is stored, it carries the watermark past the last window so that
    the job emits it (append mode emits a window only once the watermark passed its end).
    """
    return json.dumps(
        {"event_id": event_id, "device": None, "ts": ts, "temp": None, "heartbeat": True},
        separators=(",", ":"),
    ).encode()


__all__ = [
    "Device",
    "Kind",
    "Message",
    "Reading",
    "WorkloadSpec",
    "encode",
    "generate",
    "heartbeat",
    "reference_table",
]
