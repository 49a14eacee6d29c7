"""The application side of a consumer poll: Records vs columns, and the collector's share.

    .venv/bin/python bench/poll.py [--messages 1000] [--size 100] [--polls 100] [--rounds 5]

What ``Consumer.poll`` / ``poll_columns`` do after the runner thread queued the RECORDs:
check each batched RECORD (``check_batch``), then build ``Record`` tuples (``poll``, with the
cyclic collector on or paused as ``Consumer._take`` pauses it) or a ``RecordColumns`` whose
``values`` are read (``sum(map(len, values))``) or turned into Arrow (``to_arrow``). Every
mode touches every value. Prints CPU time per message, the modes alternated round by round
(the machine may be shared: compare the figures of one run), and the load average.
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from collections.abc import Callable

from dafka.records import BatchSlice, CheckedBatch, Part, RecordColumns, check_batch, encode_batch


def _parts(content: bytes, batches: int) -> list[Part]:
    out: list[Part] = []
    for i in range(batches):
        layout, columns = check_batch(content)
        checked = CheckedBatch("t", "p.0", i, content, layout, columns)
        out.append(BatchSlice(checked, 0, checked.count))
    return out


def records(parts: list[Part], pause: bool) -> int:
    if pause:
        gc.disable()
    try:
        built = [r for part in parts for r in part.records()]
    finally:
        if pause:
            gc.enable()
    return sum(len(r.value) for r in built)


def arrow_bytes(columns: RecordColumns) -> int:
    """Total value bytes from the Arrow column (every value's length, in Arrow)."""
    import pyarrow.compute as pc

    total: int = pc.sum(pc.binary_length(columns.to_arrow()["value"])).as_py()
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=1000, help="messages per batch")
    parser.add_argument("--size", type=int, default=100, help="value bytes")
    parser.add_argument("--polls", type=int, default=100, help="polls of 10 batches per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    content = encode_batch([os.urandom(args.size) for _ in range(args.messages)])
    per_poll = 10
    modes: dict[str, Callable[[list[Part]], int]] = {
        "poll: Records, collector on": lambda parts: records(parts, False),
        "poll: Records, collector paused": lambda parts: records(parts, True),
        "poll_columns: sum(map(len, values))": lambda p: sum(map(len, RecordColumns(p).values)),
        "poll_columns: to_arrow()": lambda p: arrow_bytes(RecordColumns(p)),
    }
    spent = dict.fromkeys(modes, 0.0)
    for _ in range(args.rounds):
        for name, fn in modes.items():
            start = time.process_time()
            for _ in range(args.polls):
                fn(_parts(content, per_poll))
            spent[name] += time.process_time() - start
    total = args.rounds * args.polls * per_poll * args.messages
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{total:,} messages of {args.size} B per mode, {args.messages} per batch [load {load}]")
    for name, seconds in spent.items():
        print(f"  {name:<38} {seconds / total * 1e6:6.3f} us CPU per message")


if __name__ == "__main__":
    main()
