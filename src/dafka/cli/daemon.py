"""Running daemons in the foreground until Ctrl-C, SIGTERM or the death of one of its nodes.

``dafka tower``, ``store`` and ``up`` differ only in what they build; :func:`serve` is the rest,
once: logging, start, the /metrics and /healthz server when ``--metrics-port`` is set (with
the node's samples and health), a line saying where it listens, the wait, and the stop in
reverse order.

Both signals set one event that the main thread waits on; the daemon is then stopped
cleanly (a store flushes before it exits) and the process exits 0. A second signal while
stopping exits at once.

The same event is set when a node thread of this process dies (``process_failures``, the
board every runner and tower reports to): the thread logged its traceback, the daemon
stops what still runs and exits 1 with the cause, so a supervisor sees it and restarts it.
A daemon that lived on serving nothing would hide the failure.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any, Protocol

import click

from dafka.cli._errors import UserError
from dafka.errors import DafkaError, NodeFailedError
from dafka.transport.failure import process_failures


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
        process_failures.watch(self.stop)  # a dead node ends the wait as a signal does

    def _handler(self, signum: int, _frame: FrameType | None) -> None:
        self._count += 1
        if self._count > 1:
            sys.exit(128 + signum)
        logging.getLogger("dafka").info("signal %s received, stopping", signum)
        self.stop.set()

    def wait(self) -> None:
        while not self.stop.wait(1.0):  # a timeout so that Python runs the signal handlers
            pass

    @property
    def failure(self) -> NodeFailedError | None:
        """The first node of this process that died, if one did."""
        return process_failures.first

    def restore(self) -> None:
        process_failures.unwatch(self.stop)
        for s, h in self._previous.items():
            signal.signal(s, h)


def run_until_signal(start: Callable[[], None], stop: Callable[[], None]) -> None:
    """Start, wait for a stop signal, stop; a DafkaError at start is a clean CLI error.

    A node of this process that dies ends the wait too: the rest is stopped and the command
    fails (exit 1, the cause on stderr; the traceback was logged by the dying thread).
    """
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
            try:
                stop()
            except DafkaError as exc:  # a failed node may fail its stop too: cause known
                logging.getLogger("dafka").error("while stopping: %s", exc)
    finally:
        watch.restore()
    if watch.failure is not None:
        raise click.ClickException(str(watch.failure))


class MetricsServerHost:
    """A command's /metrics and /healthz server (``--metrics-port``; off when it is 0); it
    is the :class:`~dafka.cli._client_metrics.MetricsHost` of ``produce`` and ``consume``."""

    def __init__(self, host: str, port: int) -> None:
        self._host, self._port = host, port
        self._server: Any = None

    def start(self, collect: Callable[[], Any], healthy: Callable[[], str | None]) -> None:
        if not self._port:
            return
        try:
            from dafka.metrics import MetricsServer
        except ImportError as exc:
            raise UserError(
                "--metrics-port needs prometheus-client: pip install 'dafka[metrics]'"
            ) from exc
        self._server = MetricsServer(collect, healthy, host=self._host, port=self._port)
        self._server.start()
        logging.getLogger("dafka").info(
            "metrics on http://%s:%d/metrics and /healthz", self._host, self._server.port
        )

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None


class Daemon(Protocol):
    """What ``dafka tower``, ``store`` and ``up`` run: a ``Tower``, a ``StoreNode``, a
    ``LocalCluster``."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Exposed:
    """What a daemon serves on /metrics (``samples``) and /healthz (``health``: None while
    it is healthy, else why not)."""

    samples: Callable[[], Any]
    health: Callable[[], str | None]


def serve(
    daemon: Daemon,
    *,
    verbose: bool,
    log_format: str,
    metrics: MetricsServerHost | None = None,
    exposed: Exposed | None = None,
    announce: Callable[[], None] | None = None,
) -> None:
    """Run ``daemon`` in the foreground: logs set up, started, its metrics served (when
    ``metrics`` has a port), ``announce()`` (where it listens), until a signal or the death
    of one of its nodes (:func:`run_until_signal`); then the metrics server and the daemon
    stop, in that order."""
    setup_logging(verbose, log_format)

    def start() -> None:
        daemon.start()
        if metrics is not None and exposed is not None:
            metrics.start(exposed.samples, exposed.health)
        if announce is not None:
            announce()

    def stop() -> None:
        if metrics is not None:
            metrics.stop()
        daemon.stop()

    run_until_signal(start, stop)


def setup_logging(verbose: bool, log_format: str = "text") -> None:
    """See :func:`dafka.cli._logging.setup_logging`."""
    from dafka.cli._logging import setup_logging as _setup

    _setup(verbose, log_format)


__all__ = [
    "Daemon",
    "Exposed",
    "MetricsServerHost",
    "run_until_signal",
    "serve",
    "setup_logging",
]
