"""The turn lock: a caller's thread may send a lone record, or read what arrived, itself.

Handing work between a caller's thread and the runner thread costs a thread wake-up each
way (a byte on the mailbox's PAIR or a condition's notify, a poll returning, the GIL
changing hands): at a steady 1,000 records/s the producer's and the consumer's hand-offs
were half of the publish -> poll latency and most of its tail. ZeroMQ sockets are not
thread-safe, but libzmq lets a socket move between threads with a full memory barrier
between the uses, which a lock both threads take is. So a node whose owner asks for it
(``NodeRunner(direct=True)``: a producer, a consumer) runs its turns holding
:attr:`Turns.lock` and releases it only while it is blocked in its poll; a caller that takes
the lock then (without waiting: a runner in mid-turn does the work itself) runs the machine
and sends what it asked for on the data XPUBs (``NodeRunner.run_here``), or reads what waits
on the data SUBs and takes the deliveries (``NodeRunner.wait_here``) - the only sockets a
caller touches; what else the machine asks for is left to the runner
(``Executor.execute_here``).

The runner polls every socket by its file descriptor (``ZMQ_FD``, ``_poll.py``), which reads
no socket state, so its poll may run while the lock is free, and asks a socket's readiness
(``ZMQ_EVENTS``, which processes the socket's commands) only under the lock. ``ZMQ_FD`` is
edge-triggered and a send or a read may process the socket's commands, taking the signal of a
message that arrived meanwhile, so a caller's use of a socket goes into the runner's
``Edges.used`` as the runner's own uses do (the executor's sends; a read stopped at
``receive_batch``): the runner looks at those sockets after its poll and before the next -
a read that ended on EAGAIN, or a look that found nothing, processed the commands, so the
next message signals the descriptor again. A caller that sent asks only about the
XPUBs whose notices its machine takes (:attr:`Turns.watched`): elsewhere a notice only
tells the reach watch who connected back, which every runner turn reads before the watch's
timer (``NodeRunner._lent_turn_ends``). A caller waiting for data polls the same
descriptors (:class:`DataWait`) next to a pipe its owner writes to when the runner delivered
instead, and then reads the SUBs whose descriptor became ready (``NodeRunner.wait_here``);
while it waits the runner's poll leaves the SUBs out (:attr:`Turns.readers`), and when it
has gone the runner reads them at its next turn (a timer, a beacon, a post).
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
from collections.abc import Callable
from typing import cast

import zmq
import zmq.backend


class Turns:
    """The lock of a runner's turns and what a caller needs to know under it."""

    __slots__ = (
        "fds",
        "late",
        "late_lock",
        "late_open",
        "lock",
        "open",
        "pubs",
        "readers",
        "sleeping_until",
        "sub_polling",
        "subs",
        "watched",
    )

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open = False
        """True while the poll loop runs (its sockets exist): set and cleared under the lock."""
        self.pubs: list[zmq.Socket[bytes]] = []
        """The data XPUBs a caller may send on (polled by descriptor)."""
        self.watched: list[zmq.Socket[bytes]] = []
        """Of :attr:`pubs`, those whose subscription notices the machine takes (an
        ``Identity.xpub``): the only XPUBs a caller looks at after sending (see
        :meth:`NodeRunner.run_here`)."""
        self.subs: list[zmq.Socket[bytes]] = []
        """The data SUBs a caller may read (polled by descriptor)."""
        self.fds: tuple[int, ...] = ()
        """The data SUBs' descriptors, for a caller's :class:`DataWait`."""
        self.sleeping_until: float | None = None
        """The deadline the runner's poll sleeps until while the lock is free (None: none):
        a caller that makes the machine's next deadline earlier must wake it."""
        self.readers = 0
        """Callers waiting for data on the SUBs' descriptors (``NodeRunner.wait_here``):
        while there are any, the runner's poll leaves the SUBs to them - one thread, not
        two, wakes when a record arrives. It reads them again at its next turn after."""
        self.sub_polling = False
        """The runner's poll (while the lock is free) watches the data SUBs: a caller that
        becomes a reader wakes it, so that it polls again without them."""
        self.late_lock = threading.Lock()
        """Guards :attr:`late` and :attr:`late_open`; taken last, nothing taken under it."""
        self.late: list[Callable[[float], None]] = []
        """Work a caller left for the end of the runner's turn in progress
        (``NodeRunner.run_at_turn_end``)."""
        self.late_open = False
        """The runner is in mid-turn and has not yet taken :attr:`late` (set by the runner
        when it takes the lock after its poll, cleared when it takes :attr:`late`)."""

    def take_late(self) -> list[Callable[[float], None]]:
        """The runner, at the end of its turn (the lock held): close :attr:`late` to callers
        for this turn and take what they left (run before the turn's outbox)."""
        with self.late_lock:
            self.late_open = False
            late = self.late
            if late:
                self.late = []
        return late

    def lend(
        self,
        subs: list[zmq.Socket[bytes]],
        pubs: list[zmq.Socket[bytes]],
        watched: list[zmq.Socket[bytes]],
    ) -> None:
        """The loop starts (the lock is held): these are the sockets callers may use
        (``watched``: the XPUBs of ``pubs`` whose notices the machine takes)."""
        self.subs = list(subs)
        self.pubs = list(pubs)
        self.watched = list(watched)
        self.fds = tuple(cast(int, sub.get(zmq.FD)) for sub in subs)


_EVENTS = int(zmq.EVENTS)
_POLLIN = int(zmq.POLLIN)
_get: Callable[[zmq.Socket[bytes], int], int] = zmq.backend.Socket.get  # type: ignore[assignment]
"""The Cython ``get`` (an int for ``ZMQ_EVENTS``), called as a function: no ``typing.cast``
call per look (a Python frame, on every lone record's way)."""


def readable(sock: zmq.Socket[bytes]) -> bool:
    """A message waits on ``sock`` (``ZMQ_EVENTS``: in the thread that may use it). Plain
    ints: ``int & zmq.POLLIN`` goes through ``enum.Flag``'s Python operators (~1.1 us per
    look; a lone record's way had five looks)."""
    return bool(_get(sock, _EVENTS) & _POLLIN)


class DataWait:
    """A caller's wait for data in the runner's place: the data SUBs' descriptors and a pipe
    that :meth:`wake` writes to (the owner, when the runner delivered or anything else the
    caller must see happened). Closed with :meth:`close`."""

    def __init__(self, fds: tuple[int, ...]) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        self._pipe = select.poll()
        self._pipe.register(self._read, select.POLLIN)
        self._both = select.poll()
        self._both.register(self._read, select.POLLIN)
        for fd in fds:
            self._both.register(fd, select.POLLIN)
        self._closed = False

    def wake(self) -> None:
        """Any thread: end a :meth:`wait` (now or the next one)."""
        with contextlib.suppress(BlockingIOError, OSError):  # full: a wake-up is pending
            os.write(self._write, b"\0")

    def wait(self, timeout: float | None, data: bool) -> list[int]:
        """Block until woken, data arrived (``data``: else only :meth:`wake` counts) or
        ``timeout`` seconds passed (None: no limit); takes the pending wake-ups. Returns the
        data descriptors that became readable (their sockets have commands to process: a
        message, or something else)."""
        if self._closed:
            return []
        ms = None if timeout is None else max(0, int(timeout * 1000) + 1)
        ready = (self._both if data else self._pipe).poll(ms)
        fds = []
        for fd, _ in ready:
            if fd != self._read:
                fds.append(fd)
            else:
                with contextlib.suppress(BlockingIOError, OSError):
                    while os.read(self._read, 512):
                        pass
        return fds

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            os.close(self._read)
            os.close(self._write)


__all__ = ["DataWait", "Turns", "readable"]
