"""Programs the exactly-once tests run as real processes (and SIGKILL).

``writer``: commits transaction A, then leaves transaction B open (or, with
``--kill-after-acks K``, dies in the middle of committing C with K of its ACKs stored:
``dafka.testing.crash_mid_commit``).
``writer --mode zombie``: commits A, leaves B open and waits for a line on stdin (the test
pauses it meanwhile), then tries to commit B and to send once more, saying how each ended.
``writer --mode nowait``: pipelined commits (``commit_transaction_nowait``) of 20 messages
each (``T<txn>-<i>``) until killed.
``pipeline``: consume -> transform -> produce with checkpoints stored in the output
transactions; resumes from the last committed checkpoint after a kill.
Progress goes to stdout, one line per step, flushed.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import threading
import time
from concurrent.futures import Future
from typing import Any

from dafka import ReadCommittedConsumer, TransactionalProducer
from dafka.records import ProducerFencedError
from dafka.testing import crash_mid_commit

CHECKPOINT_HEADER = "checkpoint"


def common(towers: str) -> dict[str, Any]:
    return {
        "towers": towers,
        "advertised_host": "127.0.0.1",
        "bind_host": "127.0.0.1",
        "beacon_interval": 0.2,
        "beacon_timeout": 0.8,
        "ready_timeout": 30.0,
    }


_SAY = threading.Lock()


def say(event: str, **fields: Any) -> None:
    # One line at a time: the committer's callbacks say "decided" from another thread, and
    # print() writes the text and its newline separately (lines came out interleaved).
    line = json.dumps({"event": event, **fields}) + "\n"
    with _SAY:
        sys.stdout.write(line)
        sys.stdout.flush()


def _say_decided(txn: int, decision: Future[None]) -> None:
    if decision.exception() is None:
        say("decided", txn=txn)


def writer(args: argparse.Namespace) -> None:
    crash = None if args.kill_after_acks is None else crash_mid_commit(args.kill_after_acks)
    p = TransactionalProducer(
        args.topic,
        args.tid,
        partitions=args.partitions,
        txn_lease=args.lease,
        batch_size=1,  # every message its own RECORD: sent at once, visible read-uncommitted
        commit_fault=crash,
        **common(args.towers),
    )
    say("started", log=p.log_partition)
    if args.mode == "nowait":  # pipelined commits of 20 messages each, until killed
        txn = 0
        while True:
            p.begin_transaction()
            p.produce_many(
                [b"T%d-%d" % (txn, i) for i in range(20)], [b"%d" % i for i in range(20)]
            )
            decision = p.commit_transaction_nowait()
            if txn % 10 == 0:
                say("requested", txn=txn)
                decision.add_done_callback(functools.partial(_say_decided, txn))
            txn += 1
    if args.mode == "zombie":  # paused (SIGSTOP) with B open while a successor claims the id
        with p.transaction():
            for i in range(10):
                p.send(b"A-%d" % i, key=b"%d" % i)
        p.begin_transaction()
        for future in [p.send(b"B-%d" % i, key=b"%d" % i) for i in range(10)]:
            future.result(30)
        say("sent_b")
        sys.stdin.readline()  # the test's "commit", once the process runs again
        try:
            p.commit_transaction()
            say("committed_b")
        except ProducerFencedError as exc:
            say("fenced", error=type(exc).__name__, message=str(exc))
        try:
            p.send(b"Z-after", key=b"0")
            say("sent_after")
        except ProducerFencedError as exc:
            say("refused", error=type(exc).__name__)
        p.close()
        say("closed")
        return
    if args.mode == "mid-txn":
        with p.transaction():
            for i in range(10):
                p.send(b"A-%d" % i, key=b"%d" % i)
        say("committed_a")
        p.begin_transaction()
        futures = [p.send(b"B-%d" % i, key=b"%d" % i) for i in range(10)]
        for future in futures:
            future.result(30)
        say("sent_b")
    else:
        p.begin_transaction()
        for i in range(12):
            p.send(b"C-%d" % i, key=b"%d" % i)
        say("committing_c")
        p.commit_transaction()
        say("committed_c")  # not reached when the crash fires
    while True:
        time.sleep(1)  # wait for SIGKILL


def read_checkpoint(args: argparse.Namespace) -> tuple[int, dict[str, Any] | None]:
    """The last committed checkpoint in the output topic (n, checkpoint)."""
    best: tuple[int, dict[str, Any] | None] = (-1, None)
    with ReadCommittedConsumer(
        [args.output], offset_reset="earliest", **common(args.towers)
    ) as out:
        started = time.monotonic()
        quiet_since = time.monotonic()
        while True:
            records = out.poll(0.1)
            now = time.monotonic()
            if records:
                quiet_since = now
            for record in records:
                if any(name == CHECKPOINT_HEADER for name, _ in record.headers):
                    doc = json.loads(record.value)
                    if doc["n"] > best[0]:
                        best = (doc["n"], doc["cp"])
            if now - started > 2.0 and now - quiet_since > 1.0 and out.at_end():
                return best


def pipeline(args: argparse.Namespace) -> None:
    p = TransactionalProducer(
        args.output,
        args.tid,
        partitions=args.partitions,
        txn_lease=args.lease,
        **common(args.towers),
    )
    n, checkpoint = read_checkpoint(args)
    say("resumed", n=n)
    done = 0 if checkpoint is None else int(checkpoint.get("done", 0))
    cp = None if checkpoint is None else checkpoint["consumer"]
    with ReadCommittedConsumer(
        [args.input], checkpoint=cp, offset_reset="earliest", **common(args.towers)
    ) as source:
        while done < args.total:
            records = source.poll(0.5, max_records=args.txn_size)
            if not records:
                continue
            n += 1
            with p.transaction():
                for record in records:
                    p.send(b"out-" + record.value, key=record.value)
                done += len(records)
                state = {"n": n, "cp": {"consumer": source.checkpoint(), "done": done}}
                p.send(json.dumps(state).encode(), headers=[(CHECKPOINT_HEADER, b"1")])
            say("txn", n=n, done=done)
    p.close()
    say("finished")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("program", choices=["writer", "pipeline"])
    parser.add_argument("--towers", required=True)
    parser.add_argument("--tid", required=True)
    parser.add_argument("--topic", default="t")
    parser.add_argument("--mode", default="mid-txn")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--lease", type=float, default=1.0)
    parser.add_argument("--input", default="in")
    parser.add_argument("--output", default="out")
    parser.add_argument("--total", type=int, default=0)
    parser.add_argument("--txn-size", type=int, default=20)
    parser.add_argument("--kill-after-acks", type=int, default=None)
    args = parser.parse_args(argv)
    writer(args) if args.program == "writer" else pipeline(args)


if __name__ == "__main__":
    main(sys.argv[1:])
