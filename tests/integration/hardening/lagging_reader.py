"""A process whose data SUB - made by dafka's socket factory - lags behind its peer.

    python lagging_reader.py ENDPOINT HWM LAG [heartbeats]

Connects a SUB (``dafka.transport.sockets.make_socket``, receive high-water mark ``HWM``) to
``ENDPOINT`` and prints ``{"event": "connected"}``; reads nothing until a line on stdin says
its peer has gone, then lags ``LAG`` seconds more (a store busy elsewhere), then reads what
it holds (until 1 s brings nothing) and prints ``{"event": "read", "count": N}``.

With ZMTP heartbeats on the socket (``heartbeats``: the options dafka's sockets had until
2026-11, for ``scripts/zmq_abort.py``), libzmq 4.3.5 aborts such a process during the lag
(``Assertion failed: !_io_error``, docs/nodes.md "Limits against strangers").
"""

from __future__ import annotations

import json
import sys
import time

import zmq

from dafka.transport.sockets import DATA_MESSAGE_BYTES, make_socket


def main() -> int:
    endpoint, hwm, lag = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    sub = make_socket(context, zmq.SUB, linger_ms=0, hwm=hwm, max_inbound_bytes=DATA_MESSAGE_BYTES)
    if sys.argv[4:] == ["heartbeats"]:
        sub.setsockopt(zmq.HEARTBEAT_IVL, 2000)
        sub.setsockopt(zmq.HEARTBEAT_TIMEOUT, 10_000)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.connect(endpoint)
    print(json.dumps({"event": "connected"}), flush=True)
    sys.stdin.readline()  # the peer has gone
    time.sleep(lag)  # the lag is the fault: a reader busy elsewhere while its peer left
    count = 0
    while sub.poll(1000):
        sub.recv()
        count += 1
    print(json.dumps({"event": "read", "count": count}), flush=True)
    sub.close()
    context.term()
    return 0


if __name__ == "__main__":
    sys.exit(main())
