"""The summary that checks itself: the pipeline's outputs against the expected output.

Each :class:`Check` says what it verifies and whether it held; the run fails (exit 1) if any
did not. Figures (throughput, latency) are measured, never checked.
"""

from __future__ import annotations

import bisect
import os
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dafka.pipeline._expected import Aggregate, Expected, window_of
from dafka.pipeline._outputs import aggregates_of, read_parquet_aggregates, read_topic
from dafka.pipeline._state import State
from dafka.pipeline._workload import Message

if TYPE_CHECKING:
    from dafka.pipeline._run import RunOptions, Timings

READ_COMMITTED = True
"""The checks read the topics as a downstream application would: with the read-committed
consumer (``ReadCommittedConsumer``), which delivers each committed
transaction's messages once and hides rolled-back attempts and ACKs."""


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class Summary:
    checks: list[Check] = field(default_factory=list)
    figures: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)


def _diff(name: str, got: Counter[Aggregate], want: Counter[Aggregate]) -> Check:
    missing = want - got
    extra = got - want
    repeated = sum(n - 1 for n in got.values() if n > 1)
    ok = not missing and not extra
    detail = (
        f"{sum(got.values())} rows, {sum(want.values())} expected: "
        f"{sum(missing.values())} missing, {sum(extra.values())} unexpected, {repeated} repeated"
    )
    if missing:
        detail += f"; first missing {min(missing)}"
    if extra:
        detail += f"; first unexpected {min(extra)}"
    return Check(name, ok, detail)


def _percentiles(values: list[float]) -> str:
    if not values:
        return "n/a"
    values = sorted(values)

    def at(q: float) -> float:
        return values[min(len(values) - 1, int(q * len(values)))]

    return f"p50 {at(0.5):.2f} s, p95 {at(0.95):.2f} s, max {values[-1]:.2f} s"


def latencies(
    messages: list[Message], options: RunOptions, timings: Timings
) -> tuple[list[float], list[float]]:
    """(window closed -> visible, last reading of the window produced -> visible), seconds.

    Message ``i`` of the feed was produced at ``start + i / rate`` (paced runs only). A window
    closes when a reading at least ``watermark`` past its end has been produced; windows
    closed only by the final heartbeat are left out.
    """
    if options.rate <= 0:
        return [], []
    produced_at = [timings.started + m.index / options.rate for m in messages]
    newest: list[int] = []  # newest event time up to the i-th message sent
    last_of: dict[tuple[int, str], int] = {}  # window -> position of its last reading
    top = -(1 << 62)
    for i, message in enumerate(messages):
        reading = message.reading
        if reading is not None:
            top = max(top, reading.ts)
            last_of[(window_of(reading.ts, options.window_ms), reading.device)] = i
        newest.append(top)
    closed: list[float] = []
    whole: list[float] = []
    for (start, device), seen in timings.appeared.items():
        end = start + options.window_ms
        close = bisect.bisect_left(newest, end + options.watermark_ms)
        if close < len(messages):
            closed.append(seen - produced_at[close])
        last = last_of.get((start, device))
        if last is not None:
            whole.append(seen - produced_at[last])
    return closed, whole


KEPT_UP_SECONDS = 10.0
"""The job kept up when, as the producers finished, it was at most this many seconds of
input behind (its lag in offsets over the producers' rate)."""


def kept_up(
    options: RunOptions, timings: Timings, stored: int, disrupted: bool = False
) -> tuple[Check | None, str]:
    """The check that the job kept up with a paced feed (None for an unpaced one, or one
    ``disrupted``: a job killed or failed and restarted is down while it restarts), and the
    figure of its lag over time and the rate it read at while the producers ran."""
    samples = timings.lag
    end = timings.lag_at_end
    if end is None or timings.producing_done is None:
        return None, "n/a"
    producing = max(1e-9, timings.producing_done - timings.started)
    read_rate = max(0, stored - end) / producing
    peak_at, peak = max(samples, key=lambda s: s[1], default=(0.0, 0))
    # no sample at all: a feed stopped (Ctrl-C) before the first second of producing
    quarters = (
        [samples[min(len(samples) - 1, len(samples) * q // 4)] for q in (1, 2, 3)]
        if samples
        else []
    )
    over_time = (
        f"max {peak:,} offsets at {peak_at:.0f} s; "
        + ", ".join(f"{lag:,} at {t:.0f} s" for t, lag in quarters)
        if samples
        else "not sampled (the feed stopped within its first second)"
    )
    figure = (
        over_time + f"; {end:,} when the producers were done ({producing:.0f} s): the job read "
        f"{read_rate:,.0f} events/s while they sent {stored / producing:,.0f}"
    )
    if options.rate <= 0:
        return None, figure
    if disrupted:
        return None, figure + " (not checked: the job was restarted while it ran)"
    bound = options.rate * KEPT_UP_SECONDS
    ok = end <= bound
    detail = (
        f"lag {end:,} offsets ({end / options.rate:.1f} s of input) when the producers were "
        f"done, bound {bound:,.0f} ({KEPT_UP_SECONDS:.0f} s at {options.rate:,.0f} msg/s)"
    )
    if not ok:
        detail += f": the job sustained {read_rate:,.0f} events/s, lower the rate"
    return Check("job kept up", ok, detail), figure


def check(
    options: RunOptions,
    towers: str,
    want: Expected,
    messages: list[Message],
    state: State,
    timings: Timings,
    *,
    watcher_error: BaseException | None,
    chaos_done: dict[str, bool],
    notes: list[str],
    job_restarts: int = 0,
) -> Summary:
    summary = Summary(notes=list(notes))
    add = summary.checks.append
    stored = state.acked
    add(
        Check(
            "input stored",
            stored == want.messages,
            f"{stored} messages stored by the producers, {want.messages} in the feed they sent",
        )
    )
    add(
        Check(
            "input accounted for",
            want.readings + want.duplicates + sum(want.dead_letters.values()) == want.messages,
            f"{want.messages} messages = {want.readings} readings + {want.duplicates} "
            f"duplicates + {sum(want.dead_letters.values())} malformed",
        )
    )
    expected_rows = Counter(want.aggregates)
    topic_values = [
        r.value
        for r in read_topic(
            towers,
            options.output_topic,
            read_committed=READ_COMMITTED,
            security=options.security,
        )
    ]
    try:
        topic_rows = aggregates_of(topic_values)
    except (ValueError, KeyError) as exc:
        add(Check("output topic readable", False, f"a message is not an aggregate: {exc}"))
        topic_rows = Counter()
    parquet_rows = Counter(read_parquet_aggregates(options.parquet_dir))
    add(_diff("output topic = expected", topic_rows, expected_rows))
    add(_diff("Parquet = expected", parquet_rows, expected_rows))
    add(_diff("output topic = Parquet", topic_rows, parquet_rows))
    counted = sum(a.count * n for a, n in topic_rows.items())
    add(
        Check(
            "readings counted once",
            counted == want.readings,
            f"the aggregates count {counted} readings; {want.readings} distinct were sent "
            f"({want.duplicates} duplicates dropped)",
        )
    )
    dead = Counter(
        r.value
        for r in read_topic(
            towers,
            options.dead_letter_topic,
            read_committed=READ_COMMITTED,
            security=options.security,
        )
    )
    missing = want.dead_letters - dead
    extra = dead - want.dead_letters
    add(
        Check(
            "dead letters accounted for",
            not missing and not extra,
            f"{sum(dead.values())} in the dead-letter topic, {sum(want.dead_letters.values())} "
            f"malformed sent: {sum(missing.values())} missing, {sum(extra.values())} unexpected",
        )
    )
    dropped = sum(q.dropped_by_watermark for q in state.job.queries.values())
    summary.notes.append(
        f"rows the watermark dropped as too late: {dropped} (the feed is never later than "
        f"the watermark allows, so 0 is expected)"
    )
    summary.notes.append(
        "topics checked in their read-committed view"
        if READ_COMMITTED
        else "topics checked as stored (read-uncommitted)"
    )
    if options.sink == "driver":
        summary.notes.append(
            "topics written by the at-least-once driver stand-in (--sink driver), not the "
            "connector's exactly-once sink: a micro-batch replayed after a crash is written twice"
        )
    for what, done in chaos_done.items():
        if done:
            summary.notes.append(f"chaos: {what} while the feed was being produced")
    if watcher_error is not None:
        summary.notes.append(f"latency watcher failed: {watcher_error!r}")

    # figures
    end = timings.last_output or timings.producing_done or timings.started
    elapsed = max(1e-9, end - timings.started)
    summary.figures["events"] = f"{want.messages:,} messages ({want.readings:,} readings)"
    summary.figures["throughput"] = (
        f"{want.messages / elapsed:,.0f} events/s end to end "
        f"(first produced -> last aggregate visible, {elapsed:.1f} s)"
    )
    summary.figures["micro-batches"] = ", ".join(
        f"{name} {q.batches}"
        + (f" (median {statistics.median(q.durations_ms) / 1000:.1f} s)" if q.durations_ms else "")
        for name, q in state.job.queries.items()
    )
    disrupted = job_restarts > 0 or any(chaos_done.values())
    kept, lag_figure = kept_up(options, timings, stored, disrupted)
    if kept is not None:
        add(kept)
    summary.figures["lag over time"] = lag_figure
    load = os.getloadavg()
    summary.figures["machine load"] = (
        f"load average {load[0]:.1f} (1 min), {load[1]:.1f} (5 min) on {os.cpu_count()} cores "
        "when checked: a busy machine slows the job"
    )
    if options.rate > 0:
        closed, whole = latencies(messages, options, timings)
        summary.figures["latency, window closed -> in output topic"] = _percentiles(closed)
        summary.figures["latency, last event of window -> in output topic"] = _percentiles(whole)
    return summary


__all__ = ["KEPT_UP_SECONDS", "READ_COMMITTED", "Check", "Summary", "check", "kept_up", "latencies"]
