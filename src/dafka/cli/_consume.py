"""``dafka consume``: records of one or more topics to standard output.

Data goes to stdout, diagnostics to stderr. ``-c N`` stops after N records, ``-e`` once
caught up with every partition head known after a settle time; Ctrl-C stops quietly; a
closed stdout (``dafka consume t | head``) ends the command quietly with exit 0.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from typing import Any, Protocol

from dafka.cli._client_metrics import MetricsHost, serve_metrics
from dafka.cli._output import Formatter


def consume(
    topics: tuple[str, ...],
    joining: Mapping[str, Any],
    *,
    offset_reset: str,
    start_positions: Mapping[tuple[str, str], int] | None,
    count: int | None,
    formatter: Formatter,
    from_timestamp: int | None,
    exit_at_end: bool,
    isolation_level: str = "read_uncommitted",
    metrics: MetricsHost | None = None,
) -> int:
    """Write records until ``count``, the end (``exit_at_end``), Ctrl-C or a closed stdout;
    returns how many were written. ``joining``: the consumer's settings fields that join the
    cluster (``cli._options.client_fields``)."""
    from dafka.client import Consumer

    out = sys.stdout.buffer
    seen = 0
    settle = max(2.0, 3 * float(joining["beacon_interval"]))
    started = time.monotonic()
    with Consumer(
        topics,
        offset_reset=offset_reset,
        start_positions=start_positions,
        isolation_level=isolation_level,
        **joining,
    ) as consumer:
        serve_metrics(metrics, "consumer", consumer.metrics)
        try:
            while count is None or seen < count:
                batch = consumer.poll(timeout=0.2, max_records=10_000)
                for record in batch:
                    if from_timestamp is not None and (
                        record.timestamp is not None and record.timestamp < from_timestamp
                    ):
                        continue
                    out.write(formatter(record))
                    seen += 1
                    if count is not None and seen >= count:
                        break
                if batch:
                    out.flush()
                elif exit_at_end and _at_end(consumer, started, settle):
                    break
        except KeyboardInterrupt:
            pass
        except BrokenPipeError:
            _quiet_stdout()
            return seen
        finally:
            if metrics is not None:
                metrics.stop()
        try:
            out.flush()
        except BrokenPipeError:
            _quiet_stdout()
    return seen


class _EndAware(Protocol):
    def at_end(self) -> bool: ...


def _at_end(consumer: _EndAware, started: float, settle: float) -> bool:
    """At the end: caught up with every head the consumer knows, once it had time (``settle``:
    three beacon intervals, at least 2 s) to find the stores and producers of its topics."""
    return time.monotonic() - started >= settle and consumer.at_end()


def _quiet_stdout() -> None:
    """After EPIPE: point stdout at /dev/null so that the interpreter's final flush is silent."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


__all__ = ["consume"]
