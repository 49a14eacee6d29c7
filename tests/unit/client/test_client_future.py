"""DeliveryFuture behaves as a concurrent.futures.Future through the public API."""

from __future__ import annotations

import threading
from concurrent.futures import FIRST_COMPLETED, CancelledError, InvalidStateError, wait

import pytest

from dafka.client._future import DeliveryFuture


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
