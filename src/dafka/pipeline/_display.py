"""Progress while the pipeline runs, and the summary: rich on a terminal, plain lines otherwise."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from dafka.pipeline._checks import Summary
from dafka.pipeline._run import Display, Timings
from dafka.pipeline._state import State


def _watermark(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%H:%M:%S")


def _lag(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def progress_table(state: State, phase: str, timings: Timings) -> Group:
    elapsed = max(0.0, time.time() - timings.started)
    head = Text.assemble(
        ("dafka pipeline ", "bold"),
        (f"{phase}", "cyan"),
        f"  {elapsed:5.1f} s  ",
        f"produced {state.sent:,} (stored {state.acked:,})",
        f"  aggregates seen in the output topic: {len(timings.appeared):,}",
    )
    table = Table(box=None, pad_edge=False)
    for column in ("query", "batches", "rows in", "rows out", "lag", "watermark", "last batch"):
        table.add_column(column, justify="left" if column == "query" else "right")
    for name, query in state.job.queries.items():
        table.add_row(
            name,
            f"{query.batches:,}",
            f"{query.rows_in:,}",
            f"{query.rows_out:,}",
            _lag(state.lag(name)),
            _watermark(query.watermark_ms),
            "-" if query.last_duration_ms is None else f"{query.last_duration_ms} ms",
        )
    job = f"Spark job: run {state.job.runs}" + (", running" if state.job.running else "")
    return Group(head, Text(job, style="dim"), table)


def plain_line(state: State, phase: str, timings: Timings) -> str:
    elapsed = max(0.0, time.time() - timings.started)
    queries = " ".join(
        f"{name}[b={q.batches} in={q.rows_in} out={q.rows_out} lag={_lag(state.lag(name))}]"
        for name, q in state.job.queries.items()
    )
    return (
        f"[{elapsed:6.1f}s] {phase}: produced {state.sent} stored {state.acked}; "
        f"seen {len(timings.appeared)} aggregates; {queries}"
    )


@contextmanager
def live_display(console: Console) -> Iterator[Display]:
    """A :data:`Display` for the runner: a live table on a terminal, a line every 2 s else."""
    if console.is_terminal:
        with Live(console=console, refresh_per_second=4, transient=False) as live:

            def show(state: State, phase: str, timings: Timings) -> None:
                live.update(progress_table(state, phase, timings))

            yield show
        return
    last_time = [0.0]
    last_phase = [""]

    def line(state: State, phase: str, timings: Timings) -> None:
        now = time.monotonic()
        if now - last_time[0] >= 2.0 or phase != last_phase[0]:
            console.print(plain_line(state, phase, timings), highlight=False, markup=False)
            last_time[0], last_phase[0] = now, phase

    yield line


def print_summary(console: Console, summary: Summary) -> None:
    table = Table(title="checks", box=None, pad_edge=False, title_justify="left")
    table.add_column("", width=4)
    table.add_column("check")
    table.add_column("detail")
    for check in summary.checks:
        mark = Text("ok", style="green") if check.ok else Text("FAIL", style="bold red")
        table.add_row(mark, check.name, check.detail)
    console.print(table)
    for name, value in summary.figures.items():
        console.print(f"{name}: {value}", highlight=False)
    for note in summary.notes:
        console.print(f"note: {note}", style="dim", highlight=False)
    verdict = "all checks passed" if summary.ok else "SOME CHECKS FAILED"
    console.print(verdict, style="bold green" if summary.ok else "bold red")


__all__ = ["live_display", "plain_line", "print_summary", "progress_table"]
