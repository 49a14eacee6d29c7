"""``dafka consume``: records of one or more topics to standard output.

Data goes to stdout, diagnostics to stderr. ``-c N`` stops after N records, ``-e`` once
caught up with every partition head known after a settle time; Ctrl-C stops quietly; a
closed stdout (``dafka consume t | head``) ends the command quietly with exit 0. Records
gone from every store (damage no store could repair, retention) end it with one ``Error:``
line naming them and exit 1, after everything before them was written
(``--fail-on-data-loss false`` skips them with a warning instead).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from typing import Any, Protocol

import click

from dafka.cli._client_metrics import MetricsHost, serve_metrics
from dafka.cli._groups import MemberLag
from dafka.cli._output import Formatter
from dafka.errors import DafkaError, DataLossError
from dafka.node import ConsumerStatistics


def consume(
    topics: tuple[str, ...],
    joining: Mapping[str, Any],
    *,
    offset_reset: str,
    start_positions: Mapping[tuple[str, str], int] | None,
    count: int | None,
    formatter: Formatter,
    from_timestamp: int | None,
    exit_at_end: bool,
    isolation_level: str = "read_uncommitted",
    fail_on_data_loss: bool = True,
    metrics: MetricsHost | None = None,
    group_id: str | None = None,
    group_timing: Mapping[str, Any] | None = None,
) -> int:
    """Write records until ``count``, the end (``exit_at_end``), Ctrl-C or a closed stdout;
    returns how many were written. ``joining``: the consumer's settings fields that join the
    cluster (``cli._options.client_fields``). Records gone from every store end the command
    with one ``Error:`` line naming them and exit 1 (``DataLossError``, after what came
    before them is written), unless ``fail_on_data_loss`` is off: then they are skipped with
    a warning. ``group_id``: a group member (starts at the group's commits, auto-commits,
    commits at exit); ``group_timing``: its ``session_timeout_ms`` and
    ``heartbeat_interval_ms``, if given."""
    from dafka.client import Consumer, ReadCommittedConsumer

    kind = ReadCommittedConsumer if isolation_level == "read_committed" else Consumer
    out = sys.stdout.buffer
    seen = 0
    settle = max(2.0, 3 * float(joining["beacon_interval"]))
    if group_id is not None:  # -e: the group's join window and first commit read come first
        settle += 2.0
    started = time.monotonic()
    lookout = _Lookout(topics, dict(start_positions or {}), exit_at_end, joining)
    with kind(
        topics,
        offset_reset=offset_reset,
        start_positions=start_positions,
        isolation_level=isolation_level,
        fail_on_data_loss=fail_on_data_loss,
        group_id=group_id,
        enable_auto_commit=False,  # _GroupCommits commits only what was written
        **joining,
        **(group_timing or {}),
    ) as consumer:
        commits = _GroupCommits(consumer) if group_id is not None else None
        if group_id is not None:
            _check_commits(consumer, group_id, exit_at_end, settle)
        lag = None if group_id is None or metrics is None else MemberLag(consumer, settle)
        serve_metrics(metrics, "consumer", consumer.metrics, None if lag is None else lag.samples)
        if from_timestamp is not None and kind is Consumer:
            # one implementation: the client's binary search by the records' timestamps
            consumer.seek_to_timestamp(from_timestamp, timeout=4 * settle)
        try:
            while count is None or seen < count:
                if commits is not None:
                    commits.written()  # everything polled so far is written
                left = 10_000 if count is None else min(10_000, count - seen)
                batch = consumer.poll(timeout=0.2, max_records=left)
                for record in batch:  # a RECORD sought to may start with earlier messages
                    if from_timestamp is not None and (
                        record.timestamp is not None and record.timestamp < from_timestamp
                    ):
                        continue
                    out.write(formatter(record))
                    seen += 1
                    if count is not None and seen >= count:
                        break
                if batch:
                    out.flush()
                if not lookout.done and lookout.ready(consumer, time.monotonic() - started, settle):
                    lookout.check(consumer.heads())
                    lookout.close()
                if (
                    not batch
                    and exit_at_end
                    and lookout.done
                    and _at_end(consumer, started, settle)
                    and lookout.reached(consumer)
                ):
                    break
            if commits is not None:
                out.flush()
                commits.written()  # the last batch is written too
        except KeyboardInterrupt:
            pass
        except BrokenPipeError:
            _quiet_stdout()
            return seen
        except DataLossError as exc:  # the remedy in this command's words
            out.flush()
            raise DataLossError(
                exc.fact,
                remedy="--fail-on-data-loss false skips them",
                topic=exc.topic,
                partition=exc.partition,
                first=exc.first,
                end=exc.end,
            ) from None
        finally:
            lookout.close()
            if commits is not None:
                commits.close()
            if metrics is not None:
                metrics.stop()
        try:
            out.flush()
        except BrokenPipeError:
            _quiet_stdout()
    return seen


class _GroupCommits:
    """``-G``: the group's commits, of what was written only. Before each poll everything
    polled so far was written: those positions are what may be committed (every 5 s, async)
    and what is committed at exit (sync) - also after Ctrl-C or a closed stdout in the
    middle of a batch: that batch's records are read again by the group, none is lost."""

    def __init__(self, consumer: Any, interval: float = 5.0) -> None:
        self._consumer = consumer
        self._interval = interval
        self._safe: Any = None
        self._due = time.monotonic() + interval

    def written(self) -> None:
        self._safe = self._consumer.positions_to_commit()
        now = time.monotonic()
        if now >= self._due:
            self._due = now + self._interval
            try:  # refused at once: partitions lost (the next poll drops them)
                self._consumer.commit_async(self._safe)
            except DafkaError as exc:
                click.echo(f"Warning: the group's commit failed: {exc}", err=True)

    def close(self) -> None:
        if not self._safe:  # nothing polled: nothing to commit (and no wait for a store)
            return
        try:
            self._consumer.commit(self._safe)
        except DafkaError as exc:
            click.echo(f"Warning: the group's last commit failed: {exc}", err=True)


def _check_commits(consumer: Any, group: str, exit_at_end: bool, timeout: float) -> None:
    """``-G``: the group's commits are where the member starts each partition it is given;
    if no store answers, it cannot start any. With ``-e`` the run could never end: an error
    saying why; without, a notice (it waits for a store, as for records)."""
    from dafka.client import CommitError

    try:
        consumer.committed([], timeout=timeout)
    except CommitError as exc:
        if exit_at_end:
            raise CommitError(
                f"group {group}: cannot read its committed offsets ({exc}); -e cannot end "
                "without them (is a store running?)"
            ) from None
        _notice(f"group {group}: cannot read its committed offsets yet ({exc}); waiting")


class _Lookout:
    """What the cluster said about the topics and the ``--offset`` partitions, checked once,
    after the consumer had ``settle`` seconds to hear every store's heads and a store greeted
    it (and the head watcher), or after ``4 * settle`` (a cluster without a store). ``-e``
    exits only after the check.

    A consumer waits for records that may come later (a producer that has not started yet,
    a partition that grows), so waiting is right; waiting without a word is not. So: a
    topic nobody knows is a notice on stderr (still waiting, or with ``-e`` nothing to
    read); a start offset past the partition's head is a notice saying where the head is
    (offsets count RECORDs, and a batched ``produce`` stores many messages in one); an
    ``--offset`` partition the stores and producers do not know while they know others of
    its topic is an error naming the ones they know (a typo, or a name from elsewhere).

    The heads of ``--offset`` partitions come from a :class:`~dafka.client.HeadWatcher`
    (what the stores and producers announce, closed after the check): the consumer's own
    ``heads()`` counts a start past the head as read up to it.
    """

    def __init__(
        self,
        topics: tuple[str, ...],
        starts: dict[tuple[str, str], int],
        exit_at_end: bool,
        joining: Mapping[str, Any],
    ) -> None:
        from dafka.client import ConsumerSettings, HeadWatcher

        self._topics = topics
        self._starts = starts
        self._exit_at_end = exit_at_end
        self._watcher: HeadWatcher | None = None
        if starts:
            transport = ConsumerSettings(**joining).transport()
            self._watcher = HeadWatcher(sorted({t for t, _ in starts}), transport)
        self.done = False
        # the announced head of each --offset partition at or past its start: ``-e`` ends only
        # once read up to it (the consumer may hear a store greet it before the store's heads)
        self._must_reach: dict[tuple[str, str], int] = {}

    def ready(self, consumer: _Heard, elapsed: float, settle: float) -> bool:
        """Time to look: what the cluster says is in (on a loaded machine the stores may
        take longer than ``settle`` to greet us: silence then is not absence)."""
        if elapsed < settle:
            return False
        if elapsed >= 4 * settle:
            return True
        watcher = self._watcher
        return consumer.statistics().stores_known > 0 and (watcher is None or watcher.stores > 0)

    def reached(self, consumer: _Positioned) -> bool:
        """Read up to the head each ``--offset`` partition had when the cluster was asked."""
        for (topic, partition), head in self._must_reach.items():
            try:
                if consumer.position(topic, partition) <= head:
                    return False
            except KeyError:  # not known to the consumer yet
                return False
        return True

    def close(self) -> None:
        if self._watcher is not None:
            self._watcher.close()
            self._watcher = None

    def check(self, heads: Mapping[tuple[str, str], int]) -> None:
        self.done = True
        announced = self._watcher.heads() if self._watcher is not None else {}
        # the consumer's heads of --offset partitions count its start as read: not those
        existing = {k: h for k, h in heads.items() if k not in self._starts}
        known: dict[str, set[str]] = {}
        for (topic, partition), head in [*existing.items(), *announced.items()]:
            if head >= 0:
                known.setdefault(topic, set()).add(partition)
        then = "nothing to read" if self._exit_at_end else "waiting for it (Ctrl-C to stop)"
        for topic in self._topics:
            if topic not in known:
                _notice(f"{topic}: no store or producer knows this topic (yet); {then}")
        for (topic, partition), start in sorted(self._starts.items()):
            if topic not in known:
                continue
            head = announced.get((topic, partition), -1)
            if start <= head:
                self._must_reach[(topic, partition)] = head
            if head < 0:
                raise click.ClickException(
                    f"--offset names partition {partition!r} of {topic!r}, which no store or "
                    f"producer knows; its partitions: {', '.join(sorted(known[topic]))}"
                )
            if start > head + 1:
                wait = "nothing to read" if self._exit_at_end else f"waiting for offset {start}"
                _notice(
                    f"{topic}/{partition}: --offset {start} is past the head: the last RECORD "
                    f"is offset {head} (offsets count RECORDs; a batched produce stores many "
                    f"messages in one, see docs/cli.md); {wait}"
                )


def _notice(line: str) -> None:
    click.echo(f"dafka consume: {line}", err=True)


class _EndAware(Protocol):
    def at_end(self) -> bool: ...


class _Positioned(Protocol):
    def position(self, topic: str, partition: str) -> int: ...


class _Heard(Protocol):
    def statistics(self) -> ConsumerStatistics: ...


def _at_end(consumer: _EndAware, started: float, settle: float) -> bool:
    """At the end: caught up with every head the consumer knows, once it had time (``settle``:
    three beacon intervals, at least 2 s) to find the stores and producers of its topics."""
    return time.monotonic() - started >= settle and consumer.at_end()


def _quiet_stdout() -> None:
    """After EPIPE: point stdout at /dev/null so that the interpreter's final flush is silent."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


__all__ = ["consume"]
