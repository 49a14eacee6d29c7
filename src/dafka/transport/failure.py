"""How a node's thread reports that it died: a latch per node, and one board per process.

A runner (or tower) thread that raises is finished: its sockets are closed and nothing will
answer the application again. That must never be silent. The thread's last act is
:meth:`FailureLatch.fail`, which

* records the cause once (a ``NodeFailedError`` carrying it), so that every later call of
  the node's API raises that one error instead of a ZeroMQ one or a timeout;
* sets an event and runs the listeners (a client's wake-up: a ``flush``, ``poll`` or
  ``publish`` blocked on a condition must wake up and raise, not wait for its timeout);
* reports to :data:`process_failures`, the board a daemon (``dafka store``, ``tower``,
  ``up``) waits on next to its stop signal: a daemon whose node died exits non-zero, so a
  supervisor restarts it, instead of living on serving nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from dafka.errors import NodeFailedError

log = logging.getLogger(__name__)

FailureListener = Callable[[NodeFailedError], None]


class FailureBoard:
    """The failures of every node in this process (first one kept); a daemon waits on it."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._first: NodeFailedError | None = None
        self._watchers: list[threading.Event] = []

    def report(self, error: NodeFailedError) -> None:
        with self._lock:
            if self._first is None:
                self._first = error
            watchers = list(self._watchers)
        self._event.set()
        for event in watchers:
            event.set()

    def watch(self, event: threading.Event) -> None:
        """Set ``event`` when a node fails (at once if one already has)."""
        with self._lock:
            self._watchers.append(event)
            failed = self._first is not None
        if failed:
            event.set()

    def unwatch(self, event: threading.Event) -> None:
        with self._lock:
            if event in self._watchers:
                self._watchers.remove(event)

    def wait(self, timeout: float | None = None) -> NodeFailedError | None:
        """The first failure, waiting up to ``timeout`` for one (None: no failure yet)."""
        self._event.wait(timeout)
        return self._first

    @property
    def first(self) -> NodeFailedError | None:
        return self._first


process_failures = FailureBoard()
"""Every runner and tower of this process reports here when its thread dies."""


class FailureLatch:
    """One node's failure: set once, then read by every API call and every waiter."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._error: NodeFailedError | None = None
        self._listeners: list[FailureListener] = []

    @property
    def error(self) -> NodeFailedError | None:
        """The failure, or None while the node is alive."""
        return self._error

    @property
    def event(self) -> threading.Event:
        """Set when the node failed (wait on it alongside your own events)."""
        return self._event

    def check(self) -> None:
        """Raise the failure if there is one."""
        if self._error is not None:
            raise self._error

    def add_listener(self, listener: FailureListener) -> None:
        """Call ``listener(error)`` once the node fails (at once if it already has)."""
        with self._lock:
            error = self._error
            if error is None:
                self._listeners.append(listener)
                return
        listener(error)

    def fail(self, cause: BaseException) -> NodeFailedError:
        """Record ``cause`` (the first one wins), wake every waiter and report to the board."""
        with self._lock:
            if self._error is not None:
                return self._error
            error = NodeFailedError(f"{self._name}: node failed: {cause!r}", cause)
            self._error = error
            listeners, self._listeners = self._listeners, []
        self._event.set()
        for listener in listeners:
            try:
                listener(error)
            except Exception:  # a listener must not hide the failure it is told about
                log.exception("%s: failure listener raised", self._name)
        process_failures.report(error)
        return error


__all__ = ["FailureBoard", "FailureLatch", "FailureListener", "process_failures"]
