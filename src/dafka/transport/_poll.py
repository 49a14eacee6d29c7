"""The runner's poll: its sockets' descriptors, and which sockets to ask whether a message waits.

``zmq_poll`` asks every socket it polls ``ZMQ_EVENTS`` before it sleeps and again after (a
``getpid`` and a ``poll`` system call each, as it processes the socket's commands): for a
store's five sockets, 10 looks and 12 system calls per turn where one ``poll(2)`` over their
descriptors would do. So the runner polls the descriptors (``ZMQ_FD``, one ``select.poll``,
:class:`DescriptorPoll`) and asks ``ZMQ_EVENTS`` only of the sockets that need it.

``ZMQ_FD`` is edge-triggered: it becomes readable when the socket's command mailbox is
signalled (a message arrived on a pipe the socket had found empty, a peer attached...), and
whatever processes the socket's commands takes that signal - a send (libzmq processes them
on a send at most once a millisecond), a read that did not end on EAGAIN, a look
(``ZMQ_EVENTS``), a connect, a bind or a disconnect. After a read that ended on EAGAIN, or a
look that found nothing, every pipe of the socket is known empty, so the next message
signals the descriptor again. So a socket needs a look only when it was *used* since then
(:attr:`Edges.used`): every such use adds the socket there (the executor's sends, connects
and subscriptions; a read stopped at ``receive_batch``; a socket newly polled), a read to
EAGAIN or a look that finds nothing takes it out, and the loop looks at the used sockets
(:meth:`Edges.look`) before it sleeps - a used socket whose message waits makes the poll
not block - and reads the sockets that fired or were found waiting.

A direct runner's callers (``_turns.py``) send and read on the data sockets in their own
threads under the turn lock, and add what they used to the same set: the runner looks at
those after its poll as well. Subscriptions are counted as a use too, though
``setsockopt`` processes no commands today: it is cheap, and libzmq does not promise it.
"""

from __future__ import annotations

import select
from collections.abc import Collection, Iterable
from typing import cast

import zmq

from dafka.transport._turns import readable

_POLLIN = select.POLLIN


class Edges:
    """The sockets that may hold a message their descriptor will not signal (see the module's
    docstring): one set per runner, shared by its loop, its executor and its callers."""

    __slots__ = ("used",)

    def __init__(self) -> None:
        self.used: set[zmq.Socket[bytes]] = set()
        """Used since their last read to EAGAIN or look that found nothing."""

    def look(self, skip: Collection[zmq.Socket[bytes]] = ()) -> set[zmq.Socket[bytes]]:
        """Ask each used socket (but those in ``skip``: not read this turn) whether a message
        waits; forget those where none does (their next message signals the descriptor) and
        return the others, which stay used until they are read to EAGAIN."""
        used = self.used
        waiting: set[zmq.Socket[bytes]] = set()
        for sock in list(used):
            if sock in skip:
                continue
            if readable(sock):
                waiting.add(sock)
            else:
                used.discard(sock)
        return waiting


class DescriptorPoll:
    """A ``select.poll`` over some of a runner's sockets' descriptors (``ZMQ_FD``): reads no
    socket state, so it may run while callers use the sockets (a direct runner's poll runs
    with the turn lock free). A socket registered is marked used (:class:`Edges`): its
    descriptor may have been signalled before."""

    def __init__(self, edges: Edges, socks: Iterable[zmq.Socket[bytes]] = ()) -> None:
        self._edges = edges
        self._poll = select.poll()
        self._by_fd: dict[int, zmq.Socket[bytes]] = {}
        self._fds: dict[zmq.Socket[bytes], int] = {}
        for sock in socks:
            self.register(sock)

    def register(self, sock: zmq.Socket[bytes]) -> None:
        fd = cast(int, sock.get(zmq.FD))
        self._poll.register(fd, _POLLIN)
        self._by_fd[fd] = sock
        self._fds[sock] = fd
        self._edges.used.add(sock)

    def unregister(self, sock: zmq.Socket[bytes]) -> None:
        """Before ``sock`` is closed: it is polled and looked at no more."""
        fd = self._fds.pop(sock, None)
        if fd is not None:
            self._poll.unregister(fd)
            del self._by_fd[fd]
        self._edges.used.discard(sock)

    def used(self, sock: zmq.Socket[bytes]) -> None:
        """``sock`` was used (a subscription): look at it before the next sleep."""
        self._edges.used.add(sock)

    def poll(self, timeout_ms: int) -> list[zmq.Socket[bytes]]:
        """Block up to ``timeout_ms`` (-1: no limit) for a descriptor to signal; the sockets
        whose descriptor did (their commands may hold a message, or nothing)."""
        by_fd = self._by_fd
        return [by_fd[fd] for fd, _ in self._poll.poll(timeout_ms)]


__all__ = ["DescriptorPoll", "Edges"]
