"""What the pipeline must output for a given feed (pure: the reference the checks compare to).

The rules here are the job's rules written once more in plain Python, on purpose: the job
states them in Spark SQL, this module states them record by record, and the summary compares
the two. They are:

* **parse** - a message is a reading when it is a JSON object with a string ``event_id`` and
  ``device`` and integer ``ts`` and ``temp``; a heartbeat when it has ``"heartbeat": true``
  and an integer ``ts``; anything else is a dead letter (kept byte for byte);
* **deduplicate** - one reading per ``event_id`` (the job counts one per ``event_id`` in each
  device's window: a duplicate is the same reading sent again, same device and event time);
* **aggregate** - per device and tumbling event-time window of ``window_ms``: count, sum, min
  and max of ``temp``; the job emits a window once its watermark passed the window's end;
* **enrich** - each aggregate carries the device's ``site`` and ``kind`` from the reference table.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeGuard

from dafka.pipeline._workload import Device, Reading


@dataclass(frozen=True, order=True)
class Aggregate:
    """One output row: a device's readings in one window, enriched."""

    window_start: int  # ms since the epoch, inclusive
    window_end: int  # exclusive
    device: str
    site: str | None
    kind: str | None
    count: int
    temp_sum: int
    temp_min: int
    temp_max: int

    def to_json(self) -> dict[str, object]:
        return {
            "window_start": self.window_start,
            "window_end": self.window_end,
            "device": self.device,
            "site": self.site,
            "kind": self.kind,
            "count": self.count,
            "temp_sum": self.temp_sum,
            "temp_min": self.temp_min,
            "temp_max": self.temp_max,
        }

    @classmethod
    def from_json(cls, row: dict[str, object]) -> Aggregate:
        """An output row from its JSON form (as the job writes it to the output topic)."""

        def number(name: str) -> int:
            value = row[name]
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"{name} is not an integer: {value!r}")
            return value

        def text(name: str) -> str | None:
            value = row.get(name)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{name} is not a string: {value!r}")
            return value

        device = text("device")
        if device is None:
            raise ValueError("aggregate without a device")
        return cls(
            number("window_start"),
            number("window_end"),
            device,
            text("site"),
            text("kind"),
            number("count"),
            number("temp_sum"),
            number("temp_min"),
            number("temp_max"),
        )


@dataclass(frozen=True)
class Heartbeat:
    """A message that only carries event time."""

    ts: int


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def parse(value: bytes) -> Reading | Heartbeat | None:
    """The job's parse rule for one message: a reading, a heartbeat, or None (dead letter)."""
    try:
        obj = json.loads(value.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(obj, dict):
        return None
    if obj.get("heartbeat") is True:
        return Heartbeat(obj["ts"]) if _is_int(obj.get("ts")) else None
    event_id, device, ts, temp = (obj.get(k) for k in ("event_id", "device", "ts", "temp"))
    if not (isinstance(event_id, str) and isinstance(device, str)):
        return None
    if not (_is_int(ts) and _is_int(temp)):
        return None
    return Reading(event_id, device, ts, temp)


@dataclass(frozen=True)
class Expected:
    """The exact output for a feed."""

    messages: int  # messages in the feed (heartbeats excluded)
    readings: int  # distinct readings
    duplicates: int  # messages dropped as duplicates
    dead_letters: Counter[bytes]  # the malformed messages, byte for byte, with multiplicity
    aggregates: list[Aggregate]  # sorted


def window_of(ts: int, window_ms: int) -> int:
    """The start of the tumbling window holding ``ts`` (Spark's ``window()`` with no offset)."""
    return ts - ts % window_ms


def expected(values: Iterable[bytes], table: Iterable[Device], window_ms: int) -> Expected:
    """The output the job must produce once it has read ``values`` and its watermark passed
    every window (the end-of-feed heartbeat does that)."""
    if window_ms < 1:
        raise ValueError("window_ms must be >= 1")
    devices = {d.device: d for d in table}
    seen: set[str] = set()
    dead: Counter[bytes] = Counter()
    messages = duplicates = 0
    groups: dict[tuple[int, str], list[int]] = {}
    for value in values:
        parsed = parse(value)
        if isinstance(parsed, Heartbeat):
            continue
        messages += 1
        if parsed is None:
            dead[value] += 1
            continue
        if parsed.event_id in seen:
            duplicates += 1
            continue
        seen.add(parsed.event_id)
        groups.setdefault((window_of(parsed.ts, window_ms), parsed.device), []).append(parsed.temp)
    aggregates = []
    for (start, device), temps in groups.items():
        ref = devices.get(device)
        aggregates.append(
            Aggregate(
                start,
                start + window_ms,
                device,
                ref.site if ref else None,
                ref.kind if ref else None,
                len(temps),
                sum(temps),
                min(temps),
                max(temps),
            )
        )
    aggregates.sort()
    return Expected(messages, len(seen), duplicates, dead, aggregates)


__all__ = ["Aggregate", "Expected", "Heartbeat", "expected", "parse", "window_of"]
