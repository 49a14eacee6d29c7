"""A consume-transform-produce group member *process*, exactly-once (JSON lines on stdout).

    python eos_member.py --tower HOST:SUB:PUB --input in --output out --group g --tid loop

Reads ``--input`` as a member of ``--group`` and writes ``out-<value>`` for every message to
``--output`` in transactions of at most ``--txn-size`` messages, each committing the
consumed positions with it (``send_offsets_to_transaction``). The transactional producer
starts first - it fences a predecessor with the same ``--tid`` and resolves what it left -
and only then the consumer reads the group's commits (as Kafka's ``init_transactions``
before fetching offsets). Prints ``started``, ``txn`` per commit and ``fenced`` if another
instance took over (``failed`` if its commit's data was not stored in time).

SIGUSR2 makes it a zombie the way a member usually becomes one: its next transaction is
stuck in "processing" for ``--stuck`` seconds (it prints ``stuck``) after sending its output
and offsets, while its process runs on (the producer's watchdog keeps checking for a
successor); then it tries to commit.

With ``--pause-after N``, after N transactions the member prints ``pausing`` and stops
itself (SIGSTOP) inside its next transaction, after sending its output and offsets and
before committing: a zombie paused mid-commit, resumed by the test's SIGCONT; a commit
refused because the member lost those partitions meanwhile prints ``commit_failed`` (the
transaction was aborted) and the member goes on. ``--work``: seconds each transaction's
processing takes.

With ``--pause-in-commit N``, after N transactions the member stops itself inside the next
``commit_transaction()``, after its last ownership check and before its INTENT
(``TransactionalProducer(intent_fault=dafka.testing.stop_mid_commit(...))``). With
``--restart-fenced`` a fenced producer is closed and a new instance of the same
``--tid`` started (``restarted``), and the loop goes on.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import signal
import threading
import time
from typing import Any

from dafka import (
    CommitError,
    Consumer,
    DeliveryError,
    ProducerFencedError,
    TransactionalProducer,
)
from dafka.testing import stop_mid_commit


def say(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tower", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--tid", required=True)
    parser.add_argument("--txn-size", type=int, default=13)
    parser.add_argument("--stuck", type=float, default=15.0)
    parser.add_argument("--pause-after", type=int, default=0)
    parser.add_argument("--work", type=float, default=0.0)
    parser.add_argument("--pause-in-commit", type=int, default=0)
    parser.add_argument("--restart-fenced", action="store_true")
    args = parser.parse_args()
    faulthandler.register(signal.SIGUSR1)  # a test that times out asks for the stacks
    stuck = threading.Event()
    signal.signal(signal.SIGUSR2, lambda _s, _f: stuck.set())
    common: dict[str, Any] = {"towers": args.tower, "beacon_interval": 0.2, "ready_timeout": 30.0}
    pause = stop_mid_commit(lambda: say("pausing", n=n))

    def new_producer() -> TransactionalProducer:
        return TransactionalProducer(
            args.output, args.tid, partitions=2, txn_lease=1.0, intent_fault=pause, **common
        )

    n = 0
    producer = new_producer()
    consumer = Consumer(
        args.input,
        group_id=args.group,
        enable_auto_commit=False,
        offset_reset="earliest",
        **common,
    )
    say("started")
    try:
        while True:
            records = consumer.poll(0.5, max_records=args.txn_size)
            if not records:
                continue
            try:
                with producer.transaction():
                    for record in records:
                        producer.send(b"out-" + record.value, key=record.value)
                    time.sleep(args.work)  # the application's processing
                    producer.send_offsets_to_transaction(None, consumer)
                    if stuck.is_set():
                        say("stuck")
                        threading.Event().wait(args.stuck)  # the application's slow processing
                    if args.pause_in_commit and n >= args.pause_in_commit:
                        args.pause_in_commit = 0
                        pause.armed = True  # stops in commit_transaction(), before the INTENT
                    if args.pause_after and n >= args.pause_after:
                        args.pause_after = 0
                        say("pausing", n=n)
                        os.kill(os.getpid(), signal.SIGSTOP)  # a zombie, mid-commit
            except CommitError as exc:  # lost its partitions: the transaction was aborted
                say("commit_failed", error=type(exc).__name__, message=str(exc))
                continue
            except ProducerFencedError as exc:
                if not args.restart_fenced:
                    raise
                say("fenced", error=str(exc))
                producer.close()
                producer = new_producer()  # the next instance of the id: the loop goes on
                say("restarted")
                continue
            n += 1
            stats = consumer.group_statistics()
            fenced = 0 if stats is None else stats.logs_fenced
            say("txn", n=n, last=records[-1].value.decode(), logs_fenced=fenced)
    except ProducerFencedError as exc:
        say("fenced", error=str(exc))
    except DeliveryError as exc:  # not stored: the transaction was not committed either
        say("failed", error=str(exc))


if __name__ == "__main__":
    main()
