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


def wait_for_signal() -> None:
    """Block the main thread until SIGINT or SIGTERM."""
    stop = threading.Event()
    count = 0

    def _handler(signum: int, _frame: FrameType | None) -> None:
        nonlocal count
        count += 1
        if count > 1:
            sys.exit(128 + signum)
        logging.getLogger("dafka").info("signal %s received, stopping", signum)
        stop.set()

    previous = {s: signal.signal(s, _handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stop.wait(1.0):
            pass
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def run_until_signal(start: Callable[[], None], stop: Callable[[], None]) -> None:
    """Start, wait for a stop signal, stop; a DafkaError at start is a clean CLI error."""
    try:
        start()
    except DafkaError as exc:
        raise click.ClickException(str(exc)) from exc
    try:
        wait_for_signal()
    finally:
        stop()


def setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


__all__ = ["run_until_signal", "setup_logging", "wait_for_signal"]
