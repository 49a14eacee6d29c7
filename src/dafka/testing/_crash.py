"""Crashes and failures at chosen points, for tests that break something in the middle.

Installed through a typed seam of the code under test (as ``lossy_records`` is through
``drop_inbound=``), so that production code reads no test switch: the crash is the test's.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterable, Sequence


class CrashMidCommit:
    """A ``TransactionalProducer(commit_fault=)`` that SIGKILLs this process once ``after_acks``
    ACKs of a commit are stored (0: before the first one). The process dies as a power cut
    would: no ``finally``, no flush, no goodbye."""

    def __init__(self, after_acks: int) -> None:
        if after_acks < 0:
            raise ValueError(f"after_acks must be >= 0, not {after_acks}")
        self.after_acks = after_acks

    def __call__(self, stored: int) -> None:
        if stored == self.after_acks:
            os.kill(os.getpid(), signal.SIGKILL)


def crash_mid_commit(after_acks: int) -> CrashMidCommit:
    """Kill the process in a commit's fan-out with exactly ``after_acks`` ACKs stored."""
    return CrashMidCommit(after_acks)


class StopMidCommit:
    """A ``Consumer(commit_fault=)`` that stops this process (SIGSTOP) in the next commit of
    a group member once :attr:`armed`: after the member's ownership check passed and before
    the commit is written - a zombie paused mid-commit, resumed by the test's SIGCONT. As a
    ``TransactionalProducer(intent_fault=)``: in the next commit of a transaction with a
    member's offsets, after its last ownership check and before its INTENT.
    ``before``: called first (the process says it stops)."""

    def __init__(self, before: Callable[[], object] | None = None) -> None:
        self.armed = False
        self.before = before

    def __call__(self, keys: Sequence[tuple[str, str]]) -> None:
        if not self.armed or not keys:
            return
        self.armed = False
        if self.before is not None:
            self.before()
        os.kill(os.getpid(), signal.SIGSTOP)


def stop_mid_commit(before: Callable[[], object] | None = None) -> StopMidCommit:
    """Stop the process between a group member's ownership check and its commit's write,
    once armed (``.armed = True``)."""
    return StopMidCommit(before)


class FailSinkTask:
    """A Spark sink ``fault`` (``DafkaStreamWriter.fault``): the first attempt of task 0 of
    each micro-batch in ``batches`` fails once it has sent ``rows`` rows (the sink stores
    them first), so Spark retries the task and the failed attempt's rows stay behind,
    uncommitted. Plain data, so that it pickles to the executors with the writer."""

    def __init__(self, batches: Iterable[int], rows: int) -> None:
        self.batches = frozenset(batches)
        self.rows = rows

    def __call__(self, batch: int, task: int, attempt: int, rows: int) -> bool:
        return task == 0 and attempt == 0 and batch in self.batches and rows >= self.rows


def fail_sink_task(batches: Iterable[int], rows: int) -> FailSinkTask:
    """Fail the first attempt of task 0 of each of ``batches`` after ``rows`` rows."""
    return FailSinkTask(batches, rows)


__all__ = [
    "CrashMidCommit",
    "FailSinkTask",
    "StopMidCommit",
    "crash_mid_commit",
    "fail_sink_task",
    "stop_mid_commit",
]
