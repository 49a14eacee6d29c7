"""What a timed-out test leaves behind in a process that runs Spark, and how the suite clears it.

pytest-timeout ends a test by raising from a SIGALRM handler in the main thread. In a Spark
test that is most often the middle of a py4j call: the command has gone to the JVM and the
thread waits for its answer on its own connection (pyspark pins one connection to each Python
thread). The raise leaves that connection in place with the answer still to come, so the
thread's next call reads the old call's answer as its own, and every call after that is one
answer behind (``int() argument must be ... not 'JavaObject'``): the module's shared session
was unusable and every later test of the module failed (33 of 43 in a lead CI run).

``tests/conftest.py`` wraps pytest-timeout's signal handler for Spark tests: before the raise,
:func:`detach_pending_call` looks in the interrupted stack for a py4j call waiting for its
answer and takes its connection off the thread, so the thread's next call opens a new one.
Once the test's phase has ended, :func:`stop_leftover_work` cancels the jobs and stops the
streaming queries the test left running, waits for the interrupted call to end in the JVM
(its answer arrives on the detached connection) and stops what that call started meanwhile:
a query whose ``start()`` the timeout interrupted became active after a first stop. The test
that timed out still fails; the ones after it get a working session.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

PENDING_ANSWER_WAIT = 120.0
"""Seconds to wait for the interrupted call's answer once its jobs are cancelled and its
queries stopped: a call that still runs then (a partial command the JVM waits to complete)
is given up on, its connection closed."""


def detach_pending_call(frame: FrameType | None) -> Any:
    """The py4j connection of the call ``frame`` (the frame a signal interrupted) was waiting
    in, taken off the current thread so that its next call opens a new connection; None when
    the thread was not in a py4j call. Called in the timeout's signal handler: nothing here
    reads or closes the connection, whose reader the interrupted frame is still inside."""
    if "pyspark" not in sys.modules:
        return None
    from py4j.clientserver import (  # type: ignore[import-untyped]
        ClientServerConnection,
        JavaClient,
    )
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if context is None or context._gateway is None:
        return None
    client = context._gateway._gateway_client
    if not isinstance(client, JavaClient):
        return None  # not pinned-thread mode: an interrupted connection is never handed out
    while frame is not None:
        connection = frame.f_locals.get("self")
        if frame.f_code.co_name == "send_command" and isinstance(
            connection, ClientServerConnection
        ):
            if client.get_thread_connection() is connection:
                client.thread_connection.connection = None
            return connection
        frame = frame.f_back
    return None


def stop_leftover_work(pending: Any) -> str | None:
    """Cancels every Spark job and stops every streaming query of the session, waits for the
    answer of the ``pending`` call (:func:`detach_pending_call`) and does it again, then
    closes that connection. What a test that timed out left running would hold the local
    cores for the tests after it. Returns what went wrong, if anything."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    context = SparkContext._active_spark_context
    if context is None:
        return None

    def stop() -> None:
        context.cancelAllJobs()
        # not getActiveSession(): the JVM keeps the active session per thread, and the new
        # connection is served by a new JVM thread, which has none (the query ran on)
        session = SparkSession._instantiatedSession
        if session is not None:
            for query in session.streams.active:
                query.stop()

    stop()
    if pending is None or pending.socket is None:
        return None
    try:
        pending.socket.settimeout(PENDING_ANSWER_WAIT)
        pending.stream.readline()  # the interrupted call ended in the JVM
    except OSError as e:
        return f"the interrupted py4j call did not end within {PENDING_ANSWER_WAIT} s: {e!r}"
    finally:
        pending.close()
    stop()
    return None
