"""A network link with latency, jitter and loss, in user space: two TUN devices and a loop.

``tc qdisc ... netem`` is the tool for this, but kernels built without ``sch_netem``
(``CONFIG_NET_SCH_NETEM`` unset: some CI and micro-VM kernels) refuse it. There,
:class:`~dafka.testing.Hosts` joins a host to the router through this instead: one TUN
device in each namespace (opened there with ``setns``), and this process copying every IP
packet from one to the other after ``delay`` +- ``jitter`` milliseconds (uniform, drawn per
packet, so packets may be reordered as netem reorders them), dropping ``loss`` percent of
them, each direction alike. Its standard input takes new settings while it runs, one line
``DELAY_MS JITTER_MS LOSS_PERCENT``; ``down``/``up`` drop everything / stop dropping (a cut
link); end of input ends it. It prints ``ready`` once both devices exist.

Run as ``python -m dafka.testing._link SEED NS_A DEV_A NS_B DEV_B`` (root: setns and TUN).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import heapq
import os
import random
import select
import struct
import sys
import time

_CLONE_NEWNET = 0x40000000
_TUNSETIFF = 0x400454CA
_IFF_TUN = 0x0001
_IFF_NO_PI = 0x1000
_MAX_PACKET = 65536


def open_tun(namespace: str, device: str) -> int:
    """A TUN device named ``device`` created in network namespace ``namespace`` (by its
    ``ip netns`` name); this process's own namespace is restored before returning."""
    libc = ctypes.CDLL(None, use_errno=True)
    own = os.open("/proc/self/ns/net", os.O_RDONLY)
    target = os.open(f"/var/run/netns/{namespace}", os.O_RDONLY)
    try:
        if libc.setns(target, _CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {namespace}")
        try:
            fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
            request = struct.pack("16sH", device.encode(), _IFF_TUN | _IFF_NO_PI)
            fcntl.ioctl(fd, _TUNSETIFF, request)
        finally:
            if libc.setns(own, _CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back")
    finally:
        os.close(own)
        os.close(target)
    return fd


class Impairment:
    """The current delay, jitter and loss (changed by lines on standard input)."""

    def __init__(self, seed: int) -> None:
        self.delay = 0.0
        self.jitter = 0.0
        self.loss = 0.0
        self.down = False
        self._random = random.Random(seed)

    def apply(self, line: str) -> None:
        words = line.split()
        if words == ["down"]:
            self.down = True
        elif words == ["up"]:
            self.down = False
        elif len(words) == 3:
            delay, jitter, loss = map(float, words)
            self.delay, self.jitter, self.loss = delay / 1000, jitter / 1000, loss / 100

    def due(self, now: float) -> float | None:
        """When a packet read now leaves, or None to drop it."""
        if self.down or (self.loss and self._random.random() < self.loss):
            return None
        jitter = self._random.uniform(-self.jitter, self.jitter) if self.jitter else 0.0
        return now + max(0.0, self.delay + jitter)


def run(seed: int, a: int, b: int) -> None:
    """Copy packets between TUN fds ``a`` and ``b`` until standard input ends."""
    impairment = Impairment(seed)
    queue: list[tuple[float, int, int, bytes]] = []
    order = 0
    control = sys.stdin.fileno()
    other = {a: b, b: a}
    print("ready", flush=True)
    while True:
        timeout = max(0.0, queue[0][0] - time.monotonic()) if queue else None
        readable, _, _ = select.select([a, b, control], [], [], timeout)
        now = time.monotonic()
        for fd in readable:
            if fd == control:
                line = sys.stdin.readline()
                if not line:
                    return
                impairment.apply(line)
                continue
            for _ in range(256):
                try:
                    packet = os.read(fd, _MAX_PACKET)
                except BlockingIOError:
                    break
                due = impairment.due(now)
                if due is None:
                    continue
                if due <= now and not queue:
                    _write(other[fd], packet)
                else:
                    heapq.heappush(queue, (due, order, other[fd], packet))
                    order += 1
        now = time.monotonic()
        while queue and queue[0][0] <= now:
            _, _, fd, packet = heapq.heappop(queue)
            _write(fd, packet)


def _write(fd: int, packet: bytes) -> None:
    with contextlib.suppress(OSError):  # the device is down or its queue full: a lost packet
        os.write(fd, packet)


def main(argv: list[str]) -> None:
    seed, ns_a, dev_a, ns_b, dev_b = argv
    run(int(seed), open_tun(ns_a, dev_a), open_tun(ns_b, dev_b))


if __name__ == "__main__":
    main(sys.argv[1:])
