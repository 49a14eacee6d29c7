"""``dafka produce``: messages from standard input (or files) to a topic, until all are stored.

Input is split into messages on a delimiter (a newline by default, NUL with ``-z``) or taken
whole from each ``--file``; with ``-K DELIM`` the text before the first DELIM of a message is
its key. The command exits once the stores ACKed every message (0), or after
``--flush-timeout`` seconds without progress with the count of what was not stored (1).
When no store has ACKed anything after a few seconds it says so on stderr, once.
On a terminal a progress line (rich) shows messages sent, stored, not yet ACKed and the
rate; in a pipe only errors are written.
"""

from __future__ import annotations

import io
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

import click
from rich.console import Console
from rich.live import Live
from rich.text import Text

from dafka.cli._client_metrics import MetricsHost, serve_metrics
from dafka.errors import MessageTooLargeError
from dafka.node import BackpressureError
from dafka.records import RecordMetadata

if TYPE_CHECKING:
    from dafka.client import Producer

WAITING_AFTER = 2.0
"""Seconds without any ACK before "waiting for a store" is shown."""


def split(stream: BinaryIO, delimiter: bytes, chunk: int = 1 << 16) -> Iterator[bytes]:
    """Messages of ``stream`` separated by ``delimiter``; a last piece without one counts
    unless it is empty."""
    if delimiter == b"\n" and isinstance(stream, io.BufferedIOBase | io.BytesIO):
        for line in stream:
            yield line[:-1] if line.endswith(b"\n") else line
        return
    rest = b""
    while True:
        data = stream.read(chunk)
        if not data:
            break
        pieces = (rest + data).split(delimiter)
        rest = pieces.pop()
        yield from pieces
    if rest:
        yield rest


def with_keys(
    messages: Iterable[bytes], delimiter: bytes | None
) -> Iterator[tuple[bytes | None, bytes]]:
    """(key, value) pairs: the key is what precedes the first ``delimiter`` (None if absent)."""
    for message in messages:
        if delimiter is None:
            yield None, message
            continue
        key, found, value = message.partition(delimiter)
        yield (key, value) if found else (None, message)


@dataclass
class Outcome:
    sent: int
    stored: int
    stopped_reading: bool
    refused: int = 0
    """Messages refused at the call (over ``max_message_bytes``): reported, never sent."""
    unreached: int = 0
    """Peers found through the towers that never connected back (a bind/advertise
    mismatch: no store could take the messages)."""

    @property
    def not_stored(self) -> int:
        return self.sent - self.stored


Reach = Callable[[], tuple[int, int]]
"""(peers found that have not connected back yet, peers that never did within their grace)."""


class _Counts(Protocol):
    def counts(self) -> tuple[int, int]:
        """(messages sent, messages stored)."""
        ...


class _Watch:
    """A thread that shows progress (on a terminal) and the "waiting for a store" notice.

    On a terminal the progress is one line redrawn in place by rich (messages sent, stored,
    not yet ACKed, the rate over the last second and overall) and removed at the end; in a
    pipe nothing is written but the notice.
    """

    def __init__(
        self, progress: _Counts, towers: str, tty: bool, reach: Reach | None = None
    ) -> None:
        self._progress = progress
        self._towers = towers
        self._reach = reach
        self._stop = threading.Event()
        self._live: Live | None = None
        if tty:
            self._live = Live(
                Text(""), console=Console(stderr=True), transient=True, auto_refresh=False
            )
            self._live.start()
        self._thread = threading.Thread(target=self._run, name="dafka-produce-watch", daemon=True)
        self._started = time.monotonic()
        self._thread.start()

    def _run(self) -> None:
        warned = False
        last_at, last_stored = self._started, 0
        rate = 0.0
        while not self._stop.wait(0.25):
            sent, stored = self._progress.counts()
            now = time.monotonic()
            waited = now - self._started
            awaited, unreached = self._reach() if self._reach is not None else (0, 0)
            if not warned and stored == 0 and sent and waited > WAITING_AFTER and not awaited:
                warned = True
                why = (
                    f"{unreached} peer(s) found through the towers cannot connect back to this "
                    "producer (--bind/--advertise, see the warning above)"
                    if unreached
                    else "is a store running? (dafka up / dafka store)"
                )
                self._say(
                    f"dafka produce: waiting for a store to acknowledge {sent} message(s) "
                    f"(towers {self._towers}); {why}"
                )
            if now - last_at >= 1.0:
                rate = (stored - last_stored) / (now - last_at)
                last_at, last_stored = now, stored
            if self._live is not None:
                self._live.update(progress_line(sent, stored, rate, waited), refresh=True)

    def _say(self, text: str) -> None:
        if self._live is not None:
            self._live.console.print(text, markup=False, highlight=False)
        else:
            click.echo(text, err=True)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        if self._live is not None:
            self._live.stop()


def progress_line(sent: int, stored: int, rate: float, elapsed: float) -> Text:
    """``12,000 sent  11,500 stored  500 unACKed  9,800 msg/s (avg 10,100)  1.2 s``"""
    line = Text()
    line.append(f"{sent:,}", style="bold")
    line.append(" sent  ")
    line.append(f"{stored:,}", style="bold green")
    line.append(" stored  ")
    line.append(f"{sent - stored:,}", style="bold yellow" if sent > stored else "bold")
    line.append(" unACKed  ")
    line.append(f"{rate:,.0f}", style="bold cyan")
    line.append(f" msg/s (avg {stored / max(elapsed, 1e-9):,.0f})  {elapsed:.1f} s")
    return line


class _Tally:
    """Messages sent and stored, counted from the producer's delivery callbacks."""

    def __init__(self) -> None:
        self.sent = 0
        self.stored = 0
        self.failed = 0
        self.refused = 0

    def on_delivery(self, meta: RecordMetadata | None, error: BaseException | None) -> None:
        if error is None and meta is not None:
            self.stored += 1  # one writer: the producer's thread
        else:
            self.failed += 1

    def counts(self) -> tuple[int, int]:
        return self.sent, self.stored


def produce(
    topic: str,
    messages: Iterable[tuple[bytes | None, bytes]],
    flush_timeout: float,
    metrics: MetricsHost | None = None,
    **settings: Any,
) -> Outcome:
    """Send every message, then wait for the ACKs; never waits longer than ``flush_timeout``
    without progress (for room to send, or for ACKs). ``settings``: ProducerSettings fields.
    ``metrics``: serves the producer's metrics while it runs (``--metrics-port``).
    """
    from dafka.client import Producer

    tally = _Tally()
    producer = Producer(topic, backpressure="error", on_delivery=tally.on_delivery, **settings)
    serve_metrics(metrics, "producer", producer.metrics)

    def reach() -> tuple[int, int]:
        stats = producer.transport_statistics()
        return stats.peers_awaited, stats.peers_unreached

    watch = _Watch(tally, str(settings.get("towers", "")), sys.stderr.isatty(), reach)
    stopped = False
    try:
        for key, value in messages:
            if not _send(producer, tally, key, value, flush_timeout):
                stopped = True
                break
        deadline = time.monotonic() + flush_timeout
        last = tally.stored
        while producer.flush(min(0.5, max(0.0, deadline - time.monotonic()))):
            if tally.stored != last:  # progress: the timeout counts from the last ACK
                last = tally.stored
                deadline = time.monotonic() + flush_timeout
            elif time.monotonic() >= deadline:
                break
    finally:
        watch.stop()
        if metrics is not None:
            metrics.stop()
        unreached = producer.transport_statistics().peers_unreached
        producer.close(timeout=0)  # fails what is still in flight
    return Outcome(tally.sent, tally.stored, stopped, tally.refused, unreached)


def _send(
    producer: Producer, tally: _Tally, key: bytes | None, value: bytes, flush_timeout: float
) -> bool:
    """Send one message, waiting for room while ACKs make progress; False once no ACK came
    for ``flush_timeout`` seconds."""
    deadline = time.monotonic() + flush_timeout
    last = tally.stored
    while True:
        try:
            producer.send(value, key=key)
        except MessageTooLargeError as exc:  # this one only: the others go on
            tally.refused += 1
            click.echo(
                f"dafka produce: refused message {tally.sent + tally.refused}: {exc}", err=True
            )
            return True
        except BackpressureError:
            producer.flush(0.05)
            if tally.stored != last:
                last = tally.stored
                deadline = time.monotonic() + flush_timeout
            elif time.monotonic() >= deadline:
                return False
            continue
        tally.sent += 1
        return True


def produce_transactional(
    topic: str,
    messages: Iterable[tuple[bytes | None, bytes]],
    flush_timeout: float,
    transactional_id: str,
    per_transaction: int,
    metrics: MetricsHost | None = None,
    **settings: Any,
) -> Outcome:
    """Send in transactions of ``per_transaction`` messages (0: the whole input in one);
    a message counts as stored once its transaction committed. An error (fenced, not
    stored within ``flush_timeout``) stops at the transaction that failed."""
    from dafka.client import DeliveryError, TransactionalProducer
    from dafka.errors import DafkaError

    settings.pop("name", None)
    settings.pop("batching", None)
    settings.pop("linger_ms", None)
    producer = TransactionalProducer(topic, transactional_id, **settings)
    serve_metrics(metrics, "producer", producer.metrics)
    tally = _Tally()
    watch = _Watch(tally, str(settings.get("towers", "")), sys.stderr.isatty())
    in_txn = 0
    error: DafkaError | None = None
    try:
        producer.begin_transaction()
        for key, value in messages:
            producer.send(value, key=key)
            tally.sent += 1
            in_txn += 1
            if per_transaction and in_txn >= per_transaction:
                producer.commit_transaction(timeout=flush_timeout)
                tally.stored += in_txn
                in_txn = 0
                producer.begin_transaction()
        producer.commit_transaction(timeout=flush_timeout)
        tally.stored += in_txn
    except (DeliveryError, DafkaError) as exc:
        error = exc
    finally:
        watch.stop()
        if metrics is not None:
            metrics.stop()
        producer.close(timeout=0)
    outcome = Outcome(tally.sent, tally.stored, False)
    if error is not None:
        raise click.ClickException(
            f"{outcome.not_stored} of {outcome.sent} messages were not committed: {error}"
        )
    return outcome


def open_inputs(files: tuple[Path, ...]) -> Iterator[BinaryIO]:
    for path in files:
        with path.open("rb") as f:
            yield f


__all__ = ["Outcome", "produce", "split", "with_keys"]
