"""``DeliveryFuture``: a ``concurrent.futures.Future`` that costs an object until it is used.

Why: ``Producer.send`` returns one future per message, and ``Future.__init__`` builds a
``threading.Condition`` (an RLock and a list) and two lists (``_waiters``,
``_done_callbacks``) that most futures never use - an application that sends a million
messages waits on a few of them, or on ``flush``. Those are three more objects per message
for Python's cycle collector: an application holding 300,000 futures made every full
collection walk 1.2 million objects, and ``send()`` in a loop ran at 85,000 calls/s with the
collector on against 520,000 with it off (bench/adaptive.py, issue 23). Here a new future
sets no attribute at all (the defaults are class attributes: one object, nothing else, for
the collector), the condition and the two lists exist only once someone touches it
(``result`` with a wait, ``add_done_callback``, ``cancel``, ``concurrent.futures.wait``...:
every ``Future`` method that uses them goes through ``self._condition`` first), and
completing a future nobody touched just stores the outcome. The lists' class defaults are
empty tuples: iterating them finds nothing, appending to them fails loudly.

Completion: ``set_result``/``set_exception`` for one future, and :func:`resolve_runs` for a
turn's worth at once (the producer's runner thread: one lock for all of them, not one each).

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
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, InvalidStateError
from concurrent.futures._base import CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED, PENDING
from typing import Any, TypeVar

T = TypeVar("T")

_CREATE = threading.Lock()
_DONE = (CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED)


class DeliveryFuture(Future[T]):
    """A ``Future`` whose state is built on first use (see the module docstring)."""

    __slots__ = ("_index", "_result")
    """The two fields :func:`resolve_runs` sets besides ``_state``, in slots: CPython 3.11
    keeps the first attribute set on an instance of a class whose ``__init__`` sets none
    in its inline values, but the second one builds the instance a dict of its own (one
    more object for the collector, ~0.2-0.6 us each: the runner spent ~1.2 us per future
    resolving them, issue 23). Unset until the future finishes with a value: read only once
    ``_state`` is FINISHED without an exception (as ``Future`` itself does)."""

    # The defaults of a future nobody touched: class attributes, so creating one sets none.
    _cond: threading.Condition | None = None
    _state = PENDING
    _result: Any
    _exception: BaseException | None = None
    _waiters: Any = ()
    _done_callbacks: Any = ()
    _make: Callable[..., Any] | None = None
    """A subclass's result type, built from ``(*args, index)``: :func:`resolve_runs` stores
    a run's ``args`` (one plain tuple shared by the run's futures) and each future's
    ``_index``, no new object per future; ``result`` builds the value when asked."""
    _index: int

    def __init__(self) -> None:  # no super().__init__(): it would build what is above
        pass

    @property
    def _condition(self) -> threading.Condition:  # type: ignore[override]
        cond = self._cond
        if cond is None:
            with _CREATE:
                cond = self._cond
                if cond is None:
                    if self._state == FINISHED and self._exception is None:
                        result = self._result  # the ordinary path reads _result as it is
                        if result.__class__ is tuple and self._make is not None:
                            self._result = self._make(*result, self._index)
                    self._waiters = []
                    self._done_callbacks = []
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
            result = self._result  # read once: _condition may be building it meanwhile
            if result.__class__ is tuple and self._make is not None:  # resolve_runs' args
                return self._make(*result, self._index)  # type: ignore[no-any-return]
            return result  # type: ignore[no-any-return]
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


Run = tuple[tuple[Any, ...], Sequence["DeliveryFuture[Any]"], Sequence[int]]
"""``(args, futures, indexes)``: ``futures[j]`` completes with ``_make(*args, indexes[j])``."""


def resolve_runs(runs: Iterable[Run]) -> None:
    """Completes the futures of every run (their class has ``_make``): untouched ones under
    one lock for all, storing the run's ``args`` and their index (no object per future for
    the cycle collector to walk while the application holds the futures), the others
    through ``set_result``. A future already done (cancelled by the application) is
    skipped, as ``set_result`` would refuse it."""
    touched: list[tuple[DeliveryFuture[Any], tuple[Any, ...], int]] = []
    with _CREATE:
        for args, futures, indexes in runs:
            for future, index in zip(futures, indexes):  # noqa: B905 (as long, per run)
                if future._cond is None:
                    if future._state == PENDING:
                        future._index = index
                        future._result = args
                        future._state = FINISHED  # last: a reader seeing it sees the rest
                else:
                    touched.append((future, args, index))
    for future, args, index in touched:  # the ordinary path: notifies waiters, callbacks
        make = future._make
        assert make is not None, "resolve_runs completes futures whose class has _make"
        try:  # noqa: SIM105 (per future: suppress() builds an object each time)
            future.set_result(make(*args, index))
        except InvalidStateError:  # cancelled by the application
            pass


def _name(future: object) -> str:
    return f"<{type(future).__name__} at {id(future):#x}>"


__all__ = ["DeliveryFuture", "Run", "resolve_runs"]
