"""Suite-wide pytest configuration.

Tests under ``tests/unit`` are marked ``unit``, tests under ``tests/integration`` are marked
``integration``, tests under ``tests/spark`` ``spark`` and tests under ``tests/hosts`` ``hosts``
(a cluster across network namespaces, as root) automatically, so ``pytest -m unit`` runs the
fast, pure half and ``pytest -m hosts`` the multi-host suite alone.

A run started in the background by a non-interactive shell (``cmd &`` in a script, as a CI
runner may do) inherits SIGINT *ignored*, and an ignored signal survives ``exec``: every CLI
process the tests spawn would then ignore the Ctrl-C that the Ctrl-C tests send it (Python
installs its KeyboardInterrupt handler only when SIGINT is not ignored at start). The suite
restores Python's default handler, so its children start with SIGINT at its default again.
"""

from __future__ import annotations

import signal
from collections.abc import Generator
from types import FrameType
from typing import Any

import pytest

from tests.spark.interrupted import detach_pending_call, stop_leftover_work

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# pytest-timeout times a test's fixtures too, so the first test of a Spark module pays the
# module's session start (100-107 s at load ~30, 5-10 s quiet) and its first job's warm-up
# (the JVM's first plan and task, Python workers importing dafka: 194-200 s for a 5-row read
# at load ~30, 2 s for the next test): 300 s ran out in the middle of a py4j call, which
# leaves the module's session unusable - one slow start failed all 33 tests after it.
SPARK_TIMEOUT = pytest.mark.timeout(600)

# Set when a Spark test's timeout fired (tests/spark/interrupted.py), with the py4j call it
# interrupted if any, so that the phase it fired in ends by stopping what the test left running.
TIMED_OUT = pytest.StashKey[tuple[Any]]()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = str(item.path)
        if "/tests/unit/" in path:
            item.add_marker(pytest.mark.unit)
        elif "/tests/integration/" in path:
            item.add_marker(pytest.mark.integration)
        elif "/tests/spark/" in path:
            item.add_marker(pytest.mark.spark)
            if item.get_closest_marker("timeout") is None:
                item.add_marker(SPARK_TIMEOUT)
        elif "/tests/hosts/" in path:
            item.add_marker(pytest.mark.hosts)


@pytest.hookimpl(wrapper=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> Generator[None, object, object]:
    """A Spark test's timeout first takes the py4j call it interrupts off the thread
    (tests/spark/interrupted.py; the signal method only: the thread method ends the process)."""
    result = yield
    if settings.method == "signal" and item.get_closest_marker("spark") is not None:
        raise_timeout = signal.getsignal(signal.SIGALRM)
        if callable(raise_timeout):

            def on_timeout(signum: int, frame: FrameType | None) -> None:
                __tracebackhide__ = True
                item.stash[TIMED_OUT] = (detach_pending_call(frame),)
                raise_timeout(signum, frame)

            signal.signal(signal.SIGALRM, on_timeout)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """After the phase in which a Spark test timed out: its jobs and streaming queries stop."""
    report = yield
    timed_out = item.stash.get(TIMED_OUT, None)
    if timed_out is not None:
        del item.stash[TIMED_OUT]
        try:
            problem = stop_leftover_work(timed_out[0])
        except Exception as e:  # the report says so; the tests after it will fail loudly
            problem = f"could not stop its work: {e!r}"
        if problem is not None:
            report.sections.append(("Spark after the timeout", problem))
    return report
