"""What the runner knows while the pipeline runs, folded from its children's reports (pure).

The runner feeds every report (:data:`dafka.pipeline._children.Event`) to :meth:`State.apply`
and asks the state when to move on: all producers done, the job has read everything they
stored, the watermark passed the last window. The display reads the same state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass
class ProducerState:
    sent: int = 0
    acked: int = 0
    behind: float = 0.0
    done: bool = False
    exit_code: int | None = None
    heads: dict[str, int] = field(default_factory=dict)  # partition -> next offset


@dataclass
class QueryState:
    batches: int = 0  # micro-batches completed (replays after a restart count again)
    rows_in: int = 0
    rows_out: int = 0
    watermark_ms: int | None = None
    source: str | None = None  # the topic it reads (None: the input topic)
    end: dict[str, int] = field(default_factory=dict)  # its source's partition -> next offset
    last_duration_ms: int | None = None
    dropped_by_watermark: int = 0
    durations_ms: list[int] = field(default_factory=list)  # every batch's, in order


@dataclass
class JobState:
    runs: int = 0  # job processes started (1 + restarts)
    running: bool = False
    exit_code: int | None = None
    error: str | None = None
    queries: dict[str, QueryState] = field(default_factory=dict)


def parse_watermark(text: object) -> int | None:
    """Spark's progress watermark (ISO-8601, UTC) in ms since the epoch; None when unset."""
    if not isinstance(text, str) or not text:
        return None
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    ms = int(moment.timestamp() * 1000)
    return ms if ms > 0 else None


@dataclass
class State:
    input_topic: str
    producers: dict[str, ProducerState] = field(default_factory=dict)
    job: JobState = field(default_factory=JobState)

    def apply(self, name: str, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if name == "job":
            self._apply_job(event)
            return
        producer = self.producers.setdefault(name, ProducerState())
        if kind == "progress":
            producer.sent = int(event["sent"])
            producer.acked = int(event["acked"])
            producer.behind = float(event.get("behind", 0.0))
        elif kind == "done":
            producer.done = True
            producer.sent = int(event["sent"])
            producer.acked = producer.sent
            producer.heads = {str(k): int(v) for k, v in event["heads"].items()}
        elif kind == "exit":
            producer.exit_code = int(event["code"])

    def _apply_job(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        job = self.job
        if kind == "started":
            job.running = True
            sources = event.get("sources") or {}
            for query in event.get("queries", []):
                state = job.queries.setdefault(str(query), QueryState())
                source = sources.get(query)
                state.source = None if source in (None, self.input_topic) else str(source)
        elif kind == "batch":
            query = job.queries.setdefault(str(event["query"]), QueryState())
            query.batches += 1
            query.rows_in += int(event.get("input") or 0)
            query.rows_out += max(0, int(event.get("output") or 0))
            query.watermark_ms = parse_watermark(event.get("watermark")) or query.watermark_ms
            end = event.get("end") or {}
            if isinstance(end, dict) and isinstance(end.get("producers"), dict):
                end = end.get("offsets") or {}  # a read-committed source's offsets
            if isinstance(end, dict):
                topic = query.source or self.input_topic
                query.end = {str(p): int(o) for p, o in (end.get(topic) or {}).items()}
            query.last_duration_ms = event.get("duration_ms")
            if isinstance(query.last_duration_ms, int):
                query.durations_ms.append(query.last_duration_ms)
            query.dropped_by_watermark += int(event.get("dropped_by_watermark") or 0)
        elif kind == "error":
            job.error = f"{event.get('query')}: {event.get('message')}"
        elif kind == "exit":
            job.running = False
            job.exit_code = int(event["code"])

    # -- questions the runner asks ---------------------------------------------------------

    @property
    def sent(self) -> int:
        return sum(p.sent for p in self.producers.values())

    @property
    def acked(self) -> int:
        return sum(p.acked for p in self.producers.values())

    @property
    def producers_done(self) -> bool:
        return bool(self.producers) and all(p.done for p in self.producers.values())

    def heads(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for producer in self.producers.values():
            out.update(producer.heads)
        return out

    def has_read(self, query: str, heads: dict[str, int]) -> bool:
        """Whether ``query`` has read every partition up to ``heads`` (next offsets)."""
        state = self.job.queries.get(query)
        if state is None:
            return False
        return all(state.end.get(p, 0) >= head for p, head in heads.items())

    def reads_input(self, query: str) -> bool:
        """Whether ``query`` reads the input topic (``to-parquet`` reads the output)."""
        state = self.job.queries.get(query)
        return state is not None and state.source is None

    def lag(self, query: str) -> int | None:
        """Offsets stored but not yet read by ``query``: against the producers' final heads
        once they are done, before that against the messages stored so far (a producer
        sends one message per offset). None for a query of another topic than the input."""
        state = self.job.queries.get(query)
        if state is None or state.source is not None:
            return None
        heads = self.heads()
        if heads:
            return sum(max(0, head - state.end.get(p, 0)) for p, head in heads.items())
        return max(0, self.acked - sum(state.end.values()))

    def watermark_passed(self, query: str, ms: int) -> bool:
        state = self.job.queries.get(query)
        return state is not None and state.watermark_ms is not None and state.watermark_ms >= ms


__all__ = ["JobState", "ProducerState", "QueryState", "State", "parse_watermark"]
