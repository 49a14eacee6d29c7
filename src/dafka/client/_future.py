"""``DeliveryFuture``: a ``concurrent.futures.Future`` that builds its Condition lazily.

Why: ``Producer.send`` returns one future per message, and ``Future.__init__`` builds a
``threading.Condition`` (an RLock and a list) that most futures never use - an application
that sends a million messages waits on a few of them, or on ``flush``. Creating it was the
largest cost of ``send``, and ``set_result`` acquiring and notifying it the largest cost of
completing one. Here the condition exists only once someone touches it (``result``,
``add_done_callback``, ``cancel``, ``concurrent.futures.wait``...: every ``Future`` method
goes through ``self._condition``), and ``set_result``/``set_exception`` on a future nobody
touched just store the outcome.

Correctness: creating the condition and the fast completion both run under one module lock,
so either the completion sees the condition (and notifies through the ordinary path) or the
waiter, after creating it, sees the future finished. This relies on the attributes
``Future.__init__`` sets in CPython 3.10-3.13 (``_state``, ``_result``, ``_exception``,
``_waiters``, ``_done_callbacks``); ``tests/unit/client/test_client_future.py`` checks the
behaviour through the public API. ``result``/``exception``/``done`` on a future that finished
before anyone touched it read the outcome directly: the fast completion stores the outcome
before the state, so a reader that sees FINISHED sees the outcome.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, InvalidStateError
from concurrent.futures._base import CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED, PENDING
from typing import Any, TypeVar

T = TypeVar("T")

_CREATE = threading.Lock()
_DONE = (CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED)


class DeliveryFuture(Future[T]):
    """A ``Future`` whose Condition is built on first use (see the module docstring)."""

    def __init__(self) -> None:  # no super().__init__(): it would build the Condition
        self._cond: threading.Condition | None = None
        self._state = PENDING
        self._result: Any = None
        self._exception: BaseException | None = None
        self._waiters: list[Any] = []
        self._done_callbacks: list[Any] = []

    @property
    def _condition(self) -> threading.Condition:  # type: ignore[override]
        cond = self._cond
        if cond is None:
            with _CREATE:
                cond = self._cond
                if cond is None:
                    cond = self._cond = threading.Condition()
        return cond

    def done(self) -> bool:
        return self._state in _DONE  # a read: no Condition needed

    def result(self, timeout: float | None = None) -> T:
        """Finished before anyone waited: the outcome without building the Condition (an
        application checking a million delivered futures pays a lookup, not a lock each)."""
        if self._cond is None and self._state == FINISHED:  # set after the outcome
            if self._exception is not None:
                raise self._exception
            return self._result  # type: ignore[no-any-return]
        return super().result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if self._cond is None and self._state == FINISHED:
            return self._exception
        return super().exception(timeout)

    def set_result(self, result: T) -> None:
        if self._cond is None:
            with _CREATE:
                if self._cond is None:
                    if self._state != PENDING:
                        # not {self!r}: Future.__repr__ takes the Condition -> _CREATE
                        raise InvalidStateError(f"{self._state}: {_name(self)}")
                    self._result = result
                    self._state = FINISHED
                    return
        super().set_result(result)

    def set_exception(self, exception: BaseException | None) -> None:
        if self._cond is None:
            with _CREATE:
                if self._cond is None:
                    if self._state != PENDING:
                        # not {self!r}: Future.__repr__ takes the Condition -> _CREATE
                        raise InvalidStateError(f"{self._state}: {_name(self)}")
                    self._exception = exception
                    self._state = FINISHED
                    return
        super().set_exception(exception)


def _name(future: object) -> str:
    return f"<{type(future).__name__} at {id(future):#x}>"


__all__ = ["DeliveryFuture"]
