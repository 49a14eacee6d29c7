"""A consumer-group member *process* for the committed-offsets tests (JSON lines on stdout).

    python group_member.py --tower HOST:SUB:PUB --topic t --group g --commit-every 200

Reads ``--topic`` as a member of ``--group`` (it starts at the group's commits) and prints
``{"event": "records", "values": [...]}`` for every poll (the values: what it handled),
``{"event": "committed", "handled": n}`` after each synchronous commit of everything it
handled (``--commit-every`` records; 0: auto-commit only). A test SIGKILLs it: what it printed
after its last ``committed`` line is its uncommitted tail.
"""

from __future__ import annotations

import argparse
import json

from dafka import Consumer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tower", action="append", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--commit-every", type=int, default=200)
    parser.add_argument("--max-records", type=int, default=50)
    args = parser.parse_args()
    manual = args.commit_every > 0
    with Consumer(
        args.topic,
        towers=",".join(args.tower),
        beacon_interval=0.2,
        offset_reset="earliest",
        group_id=args.group,
        enable_auto_commit=not manual,
        auto_commit_interval_ms=200,
    ) as consumer:
        print(json.dumps({"event": "ready"}), flush=True)
        handled = since = 0
        while True:
            records = consumer.poll(0.5, max_records=args.max_records)
            if not records:
                continue
            values = [r.value.decode() for r in records]
            print(json.dumps({"event": "records", "values": values}), flush=True)
            handled += len(values)
            since += len(values)
            if manual and since >= args.commit_every:
                consumer.commit()
                since = 0
                print(json.dumps({"event": "committed", "handled": handled}), flush=True)


if __name__ == "__main__":
    main()
