"""The read-committed filter alone: ``CommittedFilter`` against the plain read of the same
RECORDs, in one process (no sockets), so a profiler sees only the filter.

    .venv/bin/python bench/committed.py [--messages 200000] [--txn 4000] [--batch 2000]
        [--partitions 4] [--size 100] [--rounds 3] [--mode all|<one mode>]

Builds the RECORDs a ``TransactionalProducer`` writes (``produce_many``, keyed, 4
partitions): per transaction and partition, CONTINUE messages of one ProducerID with
consecutive clocks in batched RECORDs of ``--batch`` messages, then one ACK RECORD per
partition. Then, modes alternated round by round (the machine may be shared: compare the
figures of one run), reading every value:

* ``plain poll_columns`` / ``plain poll``: what a read-uncommitted consumer does with the
  RECORDs it took (columns; Records), ACK RECORDs left out as the consumer leaves them out;
* ``committed poll_columns`` / ``committed poll``: ``CommittedFilter.feed_columns`` of the
  same parts, polls of ``--per-poll`` RECORDs (then ``.records()`` for ``poll``).

Prints CPU time per message and msg/s per mode, the committed/plain ratios, and the load.
``--mode`` runs one mode only (for ``py-spy record``).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Iterator

from dafka.message import Clock, Flags, build_uuids, new_producer_id
from dafka.records import (
    BatchSlice,
    CheckedBatch,
    CommittedFilter,
    Part,
    RecordColumns,
    check_batch,
    encode_batch,
)
from dafka.records._txn_log import ack_uuid

Log = list[tuple[str, int, bytes, bool]]  # partition, offset, content, is an ACK RECORD


def build_log(args: argparse.Namespace) -> Log:
    """The RECORDs of ``--messages`` in transactions of ``--txn``, in arrival order."""
    producer = new_producer_id()
    clock = Clock.from_unix_ns(time.time_ns())
    value = os.urandom(args.size)
    next_offset = [0] * args.partitions
    log: Log = []
    per_partition = max(1, args.txn // args.partitions)
    sent = 0
    while sent < args.messages:
        for p in range(args.partitions):
            left = per_partition
            while left:
                n = min(args.batch, left)
                keys = [b"%d" % (p + k * args.partitions) for k in range(n)]
                uuids = build_uuids(producer, clock.tick_many(n), n, int(Flags.CONTINUE_TXN))
                content = encode_batch([value] * n, keys, uuids=uuids)
                log.append((f"t.{p}", next_offset[p], content, False))
                next_offset[p] += 1
                left -= n
                sent += n
        for p in range(args.partitions):
            ack = encode_batch([b""], uuids=[ack_uuid(producer, clock.tick())])
            log.append((f"t.{p}", next_offset[p], ack, True))
            next_offset[p] += 1
    return log


def parts_of(log: Log, acks: bool) -> list[Part]:
    """Fresh checked RECORDs (undecoded, as a poll takes them), ACK RECORDs if ``acks``."""
    out: list[Part] = []
    for partition, offset, content, is_ack in log:
        if is_ack and not acks:
            continue
        layout, columns = check_batch(content)
        out.append(
            BatchSlice(
                CheckedBatch("bench", partition, offset, content, layout, columns),
                0,
                layout.messages,
            )
        )
    return out


def polls(log: Log, per_poll: int, acks: bool) -> Iterator[list[Part]]:
    """The polls' parts, each built when its poll comes (as a consumer takes RECORDs):
    what the reader does not keep is freed poll by poll, as in a real read - a reader that
    keeps RECORDs alive pays for the memory (page faults, collections), and building every
    part up front hid that (both modes then held everything)."""
    for i in range(0, len(log), per_poll):
        yield parts_of(log[i : i + per_poll], acks)


Mode = Callable[[Iterator[list[Part]], bool], tuple[int, float]]


def plain(polls: Iterator[list[Part]], columns: bool) -> tuple[int, float]:
    """(values read, CPU seconds spent on them: the polls' building excluded)."""
    got = 0
    spent = 0.0
    for poll in polls:
        start = time.process_time()
        batch = RecordColumns(poll)
        if columns:
            got += sum(1 for v in batch.values if v)
        else:
            got += sum(1 for r in batch.records() if r.value)
        del batch, poll
        spent += time.process_time() - start
    return got, spent


def committed(polls: Iterator[list[Part]], columns: bool) -> tuple[int, float]:
    got = 0
    spent = 0.0
    f = CommittedFilter()
    for poll in polls:
        start = time.process_time()
        batch = f.feed_columns(RecordColumns(poll))
        if columns:
            got += sum(1 for v in batch.values if v)
        else:
            got += sum(1 for r in batch.records() if r.value)
        del batch, poll
        spent += time.process_time() - start
    return got, spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--txn", type=int, default=4000, help="messages per transaction")
    parser.add_argument("--batch", type=int, default=2000, help="messages per RECORD")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--size", type=int, default=100, help="value bytes")
    parser.add_argument("--per-poll", type=int, default=16, help="RECORDs per poll")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mode", default="all")
    args = parser.parse_args()
    log = build_log(args)
    modes: dict[str, tuple[Mode, bool, bool]] = {
        "plain poll_columns": (plain, True, False),
        "committed poll_columns": (committed, True, True),
        "plain poll": (plain, False, False),
        "committed poll": (committed, False, True),
    }
    if args.mode != "all":
        modes = {args.mode: modes[args.mode]}
    spent = dict.fromkeys(modes, 0.0)
    messages = 0
    for _ in range(args.rounds):
        for name, (fn, columns, acks) in modes.items():
            messages, seconds = fn(polls(log, args.per_poll, acks), columns)
            spent[name] += seconds
    total = args.rounds * messages
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"{messages:,} messages of {args.size} B x {args.rounds} rounds, transactions of "
        f"{args.txn}, {args.batch} per RECORD, {args.partitions} partitions [load {load}]"
    )
    for name, seconds in spent.items():
        rate = total / seconds
        print(f"  {name:<24} {seconds / total * 1e6:6.3f} us CPU/msg = {rate:>12,.0f} msg/s")
    for call in ("poll_columns", "poll"):
        c, p = spent.get(f"committed {call}"), spent.get(f"plain {call}")
        if c and p:
            print(f"  read committed {call}: {p / c:.2f}x read uncommitted")


if __name__ == "__main__":
    main()
