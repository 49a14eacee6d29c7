"""A consumer-group member *process* for the committed-offsets tests (JSON lines on stdout).

    python group_member.py --tower HOST:SUB:PUB --topic t --group g --commit-every 200

Reads ``--topic`` as a member of ``--group`` (it starts at the group's commits) and prints
``{"event": "records", "values": [...]}`` for every poll (the values: what it handled),
``{"event": "committed", "handled": n}`` after each synchronous commit of everything it
handled (``--commit-every`` records; 0: auto-commit only), and with ``--commit-idle`` also
when a poll finds nothing new. A test SIGKILLs it: what it printed after its last
``committed`` line is its uncommitted tail. A commit that fails prints ``commit_failed``
(the error's type and message) and the member goes on; its rebalance callbacks print
``assigned`` and ``lost`` (partitions); ``--work`` is the seconds each poll's records take
to process. With ``--pause-after N``, once it handled N records the member prints
``pausing`` and stops itself (SIGSTOP) right before its next commit: a zombie paused
mid-commit, resumed by the test's SIGCONT (at a point of its own: a test that signalled
it could come too late on a loaded machine, after the member had read everything). With
``--pause-in-commit N`` it stops inside that commit instead: after its member's ownership
check passed, before the write (``dafka.testing.stop_mid_commit``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from typing import Any

from dafka import CommitError, Consumer
from dafka.testing import stop_mid_commit


def emit(event: str, **fields: object) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def handled(events: list[dict[str, Any]]) -> tuple[list[str], int]:
    """What a member printed it handled (its ``records`` lines, read back by a test), and
    how many of those its last commit covers."""
    values: list[str] = []
    committed = 0
    for event in events:
        if event["event"] == "records":
            values += event["values"]
        elif event["event"] == "committed":
            committed = event["handled"]
    return values, committed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tower", action="append", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--commit-every", type=int, default=200)
    parser.add_argument("--max-records", type=int, default=50)
    parser.add_argument("--commit-idle", action="store_true")
    parser.add_argument("--work", type=float, default=0.0, help="seconds of work per poll")
    parser.add_argument("--pause-after", type=int, default=0)
    parser.add_argument("--pause-in-commit", type=int, default=0)
    args = parser.parse_args()
    manual = args.commit_every > 0
    handled = 0
    stop = stop_mid_commit(lambda: emit("pausing", handled=handled))
    with Consumer(
        args.topic,
        towers=",".join(args.tower),
        beacon_interval=0.2,
        offset_reset="earliest",
        group_id=args.group,
        enable_auto_commit=not manual,
        commit_fault=stop,
        auto_commit_interval_ms=200,
        on_assign=lambda keys: emit("assigned", partitions=sorted(p for _, p in keys)),
        on_lost=lambda keys: emit("lost", partitions=sorted(p for _, p in keys)),
    ) as consumer:
        emit("ready")
        since = 0
        while True:
            records = consumer.poll(0.5, max_records=args.max_records)
            values = [r.value.decode() for r in records]
            if values:
                emit("records", values=values)
                time.sleep(args.work)  # the application's processing
            handled += len(values)
            since += len(values)
            due = since >= args.commit_every or (args.commit_idle and since and not values)
            if not manual or not due:
                continue
            if args.pause_after and handled >= args.pause_after:
                args.pause_after = 0
                emit("pausing", handled=handled)
                os.kill(os.getpid(), signal.SIGSTOP)  # a zombie, mid-commit
            if args.pause_in_commit and handled >= args.pause_in_commit:
                args.pause_in_commit = 0
                stop.armed = True  # stops past the commit's ownership check
            since = 0
            try:
                consumer.commit()
            except CommitError as exc:
                emit("commit_failed", error=type(exc).__name__, message=str(exc))
                continue
            emit("committed", handled=handled)


if __name__ == "__main__":
    main()
