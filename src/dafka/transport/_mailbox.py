"""The runner thread's mailbox: work posted from other threads, and the wake-up that says so.

ZeroMQ sockets belong to one thread, so every other thread hands the runner a callable
(``post``) or asks it for a result (``call``). A callable goes on a deque, and one byte on an
inproc PAIR wakes the runner's poll - but only one per batch: while a wake-up is pending
nobody sends another (``_pending``), so a producer posting a million slices costs one send,
not a million.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import TypeVar

import zmq

from dafka.errors import DafkaError, NodeFailedError
from dafka.transport.failure import FailureLatch
from dafka.transport.sockets import CONTROL_MESSAGE_BYTES, make_socket

T = TypeVar("T")


class Mailbox:
    """Callables for the runner thread; ``endpoint`` is where its wake-up PAIR binds."""

    def __init__(
        self, context: zmq.Context[zmq.Socket[bytes]], name: str, failure: FailureLatch
    ) -> None:
        self._context = context
        self._name = name
        self._failure = failure
        self._posted: collections.deque[Callable[[float], None]] = collections.deque()
        self._lock = threading.Lock()
        self._pending = False
        self.endpoint = f"inproc://dafka-runner-{id(self)}"
        self._waker: zmq.Socket[bytes] | None = None
        self._calls: set[threading.Event] = set()
        self._calls_lock = threading.Lock()
        failure.add_listener(self._wake_callers)

    def open(self) -> None:
        """Connect the sending end (once the runner thread bound ``endpoint``)."""
        self._waker = make_socket(
            self._context, zmq.PAIR, linger_ms=0, max_inbound_bytes=CONTROL_MESSAGE_BYTES
        )
        self._waker.connect(self.endpoint)

    def close(self) -> None:
        if self._waker is not None:
            self._waker.close()
            self._waker = None

    def post(self, fn: Callable[[float], None]) -> None:
        """Run ``fn(now)`` in the runner thread (thread-safe).

        Raises :class:`NodeFailedError` once the thread died.
        """
        error = self._failure.error
        if error is not None:
            raise error
        self._posted.append(fn)
        if self._pending:
            return
        with self._lock:
            self._pending = True
            if self._waker is not None:
                try:
                    self._waker.send(b"", zmq.NOBLOCK)
                except zmq.ZMQError as exc:  # the thread is gone (or going): say so
                    self._pending = False
                    raise self._failure.error or NodeFailedError(
                        f"{self._name}: the node does not take work: {exc}", exc
                    ) from exc

    def call(self, fn: Callable[[float], T], timeout: float = 10.0) -> T:
        """Run ``fn(now)`` in the runner thread and return its result (or raise its error).

        Raises :class:`NodeFailedError` if the thread dies before it answers.
        """
        done = threading.Event()
        box: list[tuple[bool, T | BaseException]] = []

        def _run(now: float) -> None:
            try:
                box.append((True, fn(now)))
            except BaseException as exc:
                box.append((False, exc))
            done.set()

        with self._calls_lock:
            self._calls.add(done)
        try:
            self.post(_run)
            answered = done.wait(timeout)
        finally:
            with self._calls_lock:
                self._calls.discard(done)
        if not box:
            self._failure.check()
            if not answered:
                raise DafkaError(f"{self._name}: the node did not answer within {timeout}s")
        ok, value = box[0]
        if not ok:
            assert isinstance(value, BaseException)
            raise value
        return value  # type: ignore[return-value]

    def drain(self, wake: zmq.Socket[bytes], now: float) -> None:
        """In the runner thread: clear the wake-up and run what was posted before this turn.

        Only what was posted before: a callable that posts itself again (a producer
        draining a long queue in slices) runs next turn, after the sockets, the timers and
        the beacons had theirs - a turn must never grow without bound.
        """
        with self._lock:
            self._pending = False
            while True:
                try:
                    wake.recv(zmq.NOBLOCK)
                except zmq.Again:
                    break
        posted = self._posted
        for _ in range(len(posted)):
            posted.popleft()(now)

    def _wake_callers(self, _error: NodeFailedError) -> None:
        with self._calls_lock:
            for done in self._calls:
                done.set()


__all__ = ["Mailbox"]
