"""A beacon flood: made-up node ids beaconed through a tower at a fixed rate.

    python flooder.py --tower-sub tcp://127.0.0.1:5556 --rate 15000 --beacons 450000

Every beacon names a fresh id (and one of 60,000 ports on 127.0.0.1 where nobody listens), as
a stranger would to make every node track and connect to thousands of peers (issue 19). It
sends ``--beacons`` of them at ``--rate`` at most, so the flood is as large on a loaded
machine, only longer (a flood of a fixed 5 s sent 24,697 beacons instead of 75,000 at load
~30), and prints one JSON line at the end with how many it sent and in how many seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import zmq


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tower-sub", action="append", required=True)
    parser.add_argument("--rate", type=float, default=15_000.0)
    parser.add_argument("--beacons", type=int, default=450_000)
    args = parser.parse_args()
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    pub = context.socket(zmq.PUB)
    pub.setsockopt(zmq.LINGER, 0)
    pub.setsockopt(zmq.SNDHWM, 100_000)
    for endpoint in args.tower_sub:
        pub.connect(endpoint)
    time.sleep(0.5)  # the tower's subscription reaches us (a PUB drops until it does)
    prefix = os.urandom(4).hex().upper()
    sent = 0
    started = time.monotonic()
    while sent < args.beacons:
        due = min(args.beacons, int((time.monotonic() - started) * args.rate))
        while sent < due:
            port = str(1024 + sent % 60_000).encode()
            node_id = f"FLOOD{prefix}{sent:023d}".encode()
            pub.send_multipart([b"B", node_id, b"127.0.0.1", port])
            sent += 1
        time.sleep(0.005)
    seconds = round(time.monotonic() - started, 3)
    print(json.dumps({"event": "done", "sent": sent, "seconds": seconds}), flush=True)
    pub.close()
    context.term()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
