"""Tower ports for local clusters (:func:`free_port_pair`), and their error."""

from __future__ import annotations

import fcntl
import os
import socket
import tempfile
from pathlib import Path

from dafka.errors import DafkaError


class ClusterError(DafkaError):
    """A cluster member could not start (its last output lines are in the message), or no
    pair of ports was free for its tower."""


_PORT_WINDOW = 12_000
"""How many ports below the kernel's ephemeral range :func:`free_port_pair` hands out."""


def free_port_pair(host: str = "127.0.0.1") -> int:
    """A port P such that P and P+1 were both free just now (a tower's XSUB and XPUB).

    Ports come from a window just below the kernel's ephemeral range, in turn: a cursor in
    a file under the temporary directory, shared by every process of this user, moves on
    by two at each call, so a port handed out comes round again only after the whole window
    (6,000 pairs). A port the kernel picked (bind to port 0) could be one a cluster stopped
    a moment ago, and a node of that cluster still running (its tower killed, or a store
    still stopping) reconnects to it: ZeroMQ retries a dead peer's endpoint until told to
    stop, so it would join the new cluster's tower and show it foreign topics (seen in the
    parallel test suite). Below the ephemeral range, no node's own ports (the kernel's
    picks) can be one either. Falls back to the kernel's pick when that range starts too
    low for a window."""
    low = _ephemeral_low()
    if low - _PORT_WINDOW < 1024:
        return _kernel_port_pair(host)
    first = low - _PORT_WINDOW
    path = Path(tempfile.gettempdir()) / f"dafka-ports-{os.getuid()}"
    with open(path, "a+", encoding="ascii") as cursor_file:
        fcntl.flock(cursor_file, fcntl.LOCK_EX)  # released when the file is closed
        cursor_file.seek(0)
        text = cursor_file.read().strip()
        cursor = int(text) if text.isascii() and text.isdigit() else 0
        for step in range(_PORT_WINDOW // 2):
            port = first + (cursor + 2 * step) % (_PORT_WINDOW - 1)
            if _pair_free(host, port):
                cursor_file.seek(0)
                cursor_file.truncate()
                cursor_file.write(str((port - first + 2) % (_PORT_WINDOW - 1)))
                return port
    raise ClusterError(f"no two consecutive free ports in {first}..{low - 1}")


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (Linux; 32768 where unknown)."""
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text(encoding="ascii")
        return int(text.split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _pair_free(host: str, port: int) -> bool:
    with socket.socket() as a, socket.socket() as b:
        try:
            a.bind((host, port))
            b.bind((host, port + 1))
        except OSError:
            return False
    return True


def _kernel_port_pair(host: str) -> int:
    for _ in range(200):
        with socket.socket() as a:
            a.bind((host, 0))
            port = int(a.getsockname()[1])
            if port >= 65535:
                continue
            with socket.socket() as b:
                try:
                    b.bind((host, port + 1))
                except OSError:
                    continue
                return port
    raise ClusterError("no two consecutive free ports")
