"""DeliveryFuture behaves as a concurrent.futures.Future through the public API."""

from __future__ import annotations

import gc
import threading
import time
from concurrent.futures import (
    FIRST_COMPLETED,
    CancelledError,
    Future,
    InvalidStateError,
    as_completed,
    wait,
)

import pytest

from dafka.client._future import DeliveryFuture, resolve_runs


def test_result_set_before_anyone_looks() -> None:
    f: DeliveryFuture[int] = DeliveryFuture()
    assert not f.done()
    f2: DeliveryFuture[int] = DeliveryFuture()
    f2.set_result(7)
    assert f2.done()
    assert f2.result(timeout=0) == 7
    with pytest.raises(InvalidStateError):
        f2.set_result(8)
    f.set_exception(ValueError("x"))
    with pytest.raises(ValueError, match="x"):
        f.result(timeout=0)
    assert isinstance(f.exception(timeout=0), ValueError)
    # finished before anyone waited: read without building the Condition
    assert f._cond is None
    assert f2._cond is None


def test_a_waiter_after_completion_reads_the_outcome_in_any_thread() -> None:
    futures: list[DeliveryFuture[int]] = [DeliveryFuture() for _ in range(2000)]
    done = threading.Event()

    def complete() -> None:
        for i, f in enumerate(futures):
            f.set_result(i)
        done.set()

    t = threading.Thread(target=complete)
    t.start()
    for i, f in enumerate(futures):  # concurrently with the completions
        assert f.result(timeout=10) == i
    t.join(10)
    assert done.is_set()


def test_waiter_in_another_thread_is_woken() -> None:
    for _ in range(200):  # both orders of waiting and completing
        f: DeliveryFuture[int] = DeliveryFuture()
        got: list[int] = []
        t = threading.Thread(target=lambda f=f, got=got: got.append(f.result(timeout=10)))
        t.start()
        f.set_result(1)
        t.join(10)
        assert got == [1]


def test_callbacks_cancel_and_wait() -> None:
    seen: list[int] = []
    f: DeliveryFuture[int] = DeliveryFuture()
    f.add_done_callback(lambda fut: seen.append(fut.result()))
    f.set_result(3)
    late: DeliveryFuture[int] = DeliveryFuture()
    late.set_result(4)
    late.add_done_callback(lambda fut: seen.append(fut.result()))
    assert seen == [3, 4]
    c: DeliveryFuture[int] = DeliveryFuture()
    assert c.cancel()
    with pytest.raises(CancelledError):
        c.result(timeout=0)
    with pytest.raises(InvalidStateError):
        c.set_result(1)
    pending: DeliveryFuture[int] = DeliveryFuture()
    done, _ = wait([pending, late], timeout=1, return_when=FIRST_COMPLETED)
    assert done == {late}
    threading.Timer(0.05, pending.set_result, (5,)).start()
    done, not_done = wait([pending], timeout=10)
    assert done == {pending}
    assert not not_done


class Meta(tuple[str, int]):
    """A result type built from ``(*args, index)``, as ``RecordMetadata`` is."""

    def __new__(cls, name: str, index: int) -> Meta:
        return super().__new__(cls, (name, index))


class MetaFuture(DeliveryFuture[Meta]):
    _make = Meta


def test_resolve_runs_completes_untouched_futures_without_an_object_each() -> None:
    futures = [MetaFuture() for _ in range(4)]
    resolve_runs([(("a",), futures[:2], [0, 1]), (("b",), futures[2:], [5, 9])])
    assert [f.result(timeout=0) for f in futures] == [("a", 0), ("a", 1), ("b", 5), ("b", 9)]
    assert all(isinstance(f.result(timeout=0), Meta) for f in futures)
    assert all(f._cond is None for f in futures)  # nobody waited: no Condition was built
    # what a future holds is the run's shared tuple, not an object of its own
    assert futures[0]._result is futures[1]._result
    gc.collect()
    assert not gc.is_tracked(futures[0]._result)


def test_a_future_touched_after_resolve_runs_sees_the_built_value() -> None:
    f = MetaFuture()
    resolve_runs([(("a",), [f], [3])])
    seen: list[object] = []
    f.add_done_callback(lambda fut: seen.append(fut.result()))  # builds the Condition
    assert seen == [("a", 3)]
    assert isinstance(seen[0], Meta)
    g = MetaFuture()
    resolve_runs([(("b",), [g], [4])])
    done, _ = wait([g], timeout=1)
    assert done == {g}
    pending: list[Future[Meta]] = [g]
    assert [x.result() for x in as_completed(pending, timeout=1)] == [("b", 4)]
    assert isinstance(g.result(timeout=0), Meta)


def test_resolve_runs_wakes_waiters_runs_callbacks_and_skips_cancelled() -> None:
    waited, called, cancelled = MetaFuture(), MetaFuture(), MetaFuture()
    got: list[object] = []
    t = threading.Thread(target=lambda: got.append(waited.result(timeout=10)))
    t.start()
    deadline = time.monotonic() + 10
    while waited._cond is None:  # the waiter built its Condition: it waits on it
        assert time.monotonic() < deadline, "the waiter never waited"
        time.sleep(0.001)
    called.add_done_callback(lambda fut: got.append(fut.result()))
    assert cancelled.cancel()
    resolve_runs([(("r",), [waited, called, cancelled], [0, 1, 2])])
    t.join(10)
    assert sorted(got, key=lambda m: m[1]) == [("r", 0), ("r", 1)]  # type: ignore[index]
    assert cancelled.cancelled()


def test_resolve_runs_against_waiters_in_other_threads() -> None:
    """Completion and first waits race: every waiter gets the built value exactly."""
    for _ in range(50):
        futures = [MetaFuture() for _ in range(200)]
        results: list[object] = []

        def read(futures: list[MetaFuture] = futures, results: list[object] = results) -> None:
            results.extend(f.result(timeout=10) for f in futures)

        readers = [threading.Thread(target=read) for _ in range(2)]
        for r in readers:
            r.start()
        resolve_runs([(("x",), futures, range(200))])
        for r in readers:
            r.join(10)
        assert results == [("x", i) for i in range(200)] * 2
        assert all(isinstance(m, Meta) for m in results)


def test_resolving_futures_allocates_nothing_for_the_collector() -> None:
    """``resolve_runs`` stores each future's index and its run's args in slots: no object
    per future (issue 23: CPython 3.11 built each future a dict of its own at its second
    attribute, one more tracked object per held future and ~1 us of the producer's runner
    per message with the young collections it set off)."""
    count = 20_000

    class Fresh(MetaFuture):
        """A class whose instances never had an attribute set: as the futures a producer's
        first send() loop makes, every one created before the first is resolved."""

    futures = [Fresh() for _ in range(count)]
    collections: list[int] = []

    def counted(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    gc.collect()
    gc.callbacks.append(counted)
    try:
        resolve_runs([(("t",), futures, range(count))])
    finally:
        gc.callbacks.remove(counted)
    assert collections == [], f"{len(collections)} collections while resolving {count:,}"
    assert futures[5].result(timeout=0) == ("t", 5)
    pending = Fresh()
    assert "pending" in repr(pending)  # nothing read before it finishes
    pending.set_exception(ValueError("x"))
    assert "raised ValueError" in repr(pending)
    assert isinstance(pending.exception(timeout=0), ValueError)
