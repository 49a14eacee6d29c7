"""The turn lock: a caller's thread may send a lone record itself, in the runner's place.

Handing a record to the runner thread costs a thread wake-up (a byte on the mailbox's PAIR,
the runner's poll returning, the GIL changing hands): at a steady 1,000 records/s that was a
quarter of the publish -> poll latency and most of its tail. ZeroMQ sockets are not
thread-safe, but libzmq lets a socket move between threads with a full memory barrier between
the uses, which a lock both threads take is. So a node whose owner asks for it
(``NodeRunner(direct=True)``, a producer) runs its turns holding :attr:`Turns.lock` and
releases it only while it is blocked in its poll; a caller that takes the lock then (without
waiting: a runner in mid-turn does the work itself) runs the machine and sends what it asked
for on the data XPUBs - the only sockets a caller touches (``Executor.execute_here``).

While the lock is free the runner polls those XPUBs by their file descriptor (``ZMQ_FD``),
which reads no socket state, and asks their readiness (``ZMQ_EVENTS``, which processes the
socket's commands) only under the lock. ``ZMQ_FD`` is edge-triggered and a send may process
the socket's commands, taking the signal of a subscription notice that arrived meanwhile, so
whoever used an XPUB last asks :meth:`Turns.notices_waiting` before it lets go: the runner
then polls without blocking, a caller wakes the runner.
"""

from __future__ import annotations

import threading
from typing import cast

import zmq


class Turns:
    """The lock of a runner's turns and what a caller needs to know under it."""

    __slots__ = ("lock", "open", "pubs", "sleeping_until")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open = False
        """True while the poll loop runs (its sockets exist): set and cleared under the lock."""
        self.pubs: list[zmq.Socket[bytes]] = []
        """The data XPUBs a caller may send on (polled by descriptor)."""
        self.sleeping_until: float | None = None
        """The deadline the runner's poll sleeps until while the lock is free (None: none):
        a caller that makes the machine's next deadline earlier must wake it."""

    def notices_waiting(self) -> bool:
        """A subscription notice waits on an XPUB (the lock is held)."""
        return any(map(readable, self.pubs))


def readable(sock: zmq.Socket[bytes]) -> bool:
    """A message waits on ``sock`` (``ZMQ_EVENTS``: in the thread that may use it)."""
    return bool(cast(int, sock.get(zmq.EVENTS)) & zmq.POLLIN)


__all__ = ["Turns", "readable"]
