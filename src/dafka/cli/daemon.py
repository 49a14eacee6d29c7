"""Running daemons in the foreground until Ctrl-C or SIGTERM.

Both signals set one event that the main thread waits on; the daemon is then stopped
cleanly (a store flushes before it exits) and the process exits 0. A second signal while
stopping exits at once.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType

import click

from dafka.errors import DafkaError


class _SignalWatch:
    """SIGINT and SIGTERM set one event while installed; a second signal exits at once.

    Installed before a daemon starts and removed only after it stopped, so that a signal
    that arrives while stopping (Ctrl-C again, or a group signal) never surfaces as a
    KeyboardInterrupt in the middle of a flush.
    """

    def __init__(self) -> None:
        self.stop = threading.Event()
        self._count = 0
        self._previous = {
            s: signal.signal(s, self._handler) for s in (signal.SIGINT, signal.SIGTERM)
        }

    def _handler(self, signum: int, _frame: FrameType | None) -> None:
        self._count += 1
        if self._count > 1:
            sys.exit(128 + signum)
        logging.getLogger("dafka").info("signal %s received, stopping", signum)
        self.stop.set()

    def wait(self) -> None:
        while not self.stop.wait(1.0):
            pass

    def restore(self) -> None:
        for s, h in self._previous.items():
            signal.signal(s, h)


def wait_for_signal() -> None:
    """Block the main thread until SIGINT or SIGTERM."""
    watch = _SignalWatch()
    try:
        watch.wait()
    finally:
        watch.restore()


def run_until_signal(start: Callable[[], None], stop: Callable[[], None]) -> None:
    """Start, wait for a stop signal, stop; a DafkaError at start is a clean CLI error."""
    watch = _SignalWatch()
    try:
        try:
            start()
        except DafkaError as exc:
            stop()
            raise click.ClickException(str(exc)) from exc
        try:
            if not watch.stop.is_set():
                watch.wait()
        finally:
            stop()
    finally:
        watch.restore()


def setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


__all__ = ["run_until_signal", "setup_logging", "wait_for_signal"]
