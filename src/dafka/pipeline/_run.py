"""The runner: the whole pipeline end to end, then a summary that checks itself.

1. A local dafka cluster (tower and two stores, each its own process) in ``data_dir``, unless
   ``towers`` names an existing one.
2. The Spark job (:mod:`._job`) and ``producers`` event producers (:mod:`._feed`), as child
   processes; a watcher consumes the output topic live to time when aggregates appear.
3. When the producers are done (the feed's end, or Ctrl-C in the forever mode) and the job
   has read everything they stored, a heartbeat moves event time past the last window; once
   the job's watermark passed it, every aggregate is out and the job is stopped.
4. The checks (:mod:`._checks`) compare the outputs with :func:`dafka.pipeline.expected`.

Chaos options kill the Spark job (SIGKILL of its process group, then a restart from its
checkpoints) and a store (SIGKILL; the cluster's supervisor restarts it) while it runs.
"""

from __future__ import annotations

import json
import queue
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Any

from dafka.config import PLAINTEXT, KeyFiles
from dafka.pipeline._checks import Summary, check
from dafka.pipeline._children import Child, Event
from dafka.pipeline._expected import expected
from dafka.pipeline._feed import FeedConfig, feed, share_of
from dafka.pipeline._job import JobConfig
from dafka.pipeline._state import State
from dafka.pipeline._workload import Message, WorkloadSpec, heartbeat, reference_table


class PipelineError(Exception):
    """The pipeline could not run to its checks (a child failed, a deadline passed)."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C stopped the run before its checks (raised from the SIGINT handler, so that a
    blocking step - the cluster's start, Spark's, a flush, the checks' reads - ends at once;
    the runner's ``finally`` then stops the job, the producers and the cluster)."""

    def __init__(self, phase: str) -> None:
        super().__init__(phase)
        self.phase = phase


@dataclass(frozen=True)
class Chaos:
    """Failures to inject while the pipeline runs (the test's, and ``--chaos``'s)."""

    kill_job_after_batches: int | None = None  # SIGKILL the job once to-topic did N batches
    kill_store_at: float | None = None  # SIGKILL store-0 once this fraction of the feed is sent


@dataclass(frozen=True)
class RunOptions:
    data_dir: Path
    spec: WorkloadSpec = field(default_factory=WorkloadSpec)
    towers: str | None = None  # an existing cluster; None: start a local one in data_dir
    spark_master: str = "local[2]"
    producers: int = 2
    partitions_per_producer: int = 1  # each a scan task and a dead-letter writer per batch
    rate: float = 300.0  # msg/s, all producers together (kept up on 2 busy cores); 0: unpaced
    window_ms: int = 5_000
    watermark_ms: int = 20_000
    trigger_ms: int = 500
    sink: str = "dafka"  # or "driver": at-least-once stand-in (see _job._DriverSink)
    forever: bool = False
    chaos: Chaos = field(default_factory=Chaos)
    timeout: float = 900.0  # the whole run, checks excluded
    drain_timeout: float = 180.0  # from the producers' end to the last aggregate
    job_retries: int = 3  # restarts of a failed Spark job (from its checkpoints)
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    security: KeyFiles = PLAINTEXT  # --key...: the local cluster, producers, job, checks
    python: str = sys.executable

    @property
    def input_topic(self) -> str:
        return f"sensors-{self.run_id}"

    @property
    def output_topic(self) -> str:
        return f"sensor-aggregates-{self.run_id}"

    @property
    def dead_letter_topic(self) -> str:
        return f"sensor-dead-letters-{self.run_id}"

    @property
    def parquet_dir(self) -> Path:
        return self.data_dir / "output" / f"aggregates-{self.run_id}"


LAG_EVERY = 1.0
"""Seconds between the runner's samples of the job's lag (kept in :attr:`Timings.lag`)."""


@dataclass
class Timings:
    started: float = field(default_factory=time.time)
    producing_done: float | None = None
    last_output: float | None = None
    appeared: dict[tuple[int, str], float] = field(default_factory=dict)  # aggregate -> time
    lag: list[tuple[float, int]] = field(default_factory=list)
    """(seconds since the feed started, the largest lag of the job's queries in offsets),
    every :data:`LAG_EVERY` s while producing and draining."""
    lag_at_end: int | None = None
    """The largest lag of the job's queries when the producers were done."""


Display = Callable[[State, str, Timings], None]


def sent_messages(options: RunOptions, sent: dict[int, int]) -> list[Message]:
    """The messages producers actually sent: each sent the first ``sent[p]`` messages of its
    share of the feed (all of it unless stopped early)."""
    counts = dict.fromkeys(range(options.producers), 0)
    out: list[Message] = []
    wanted = sum(sent.values())
    for message in feed(options.spec, options.forever):
        if len(out) >= wanted:
            break
        share = share_of(message.key, options.producers)
        if counts[share] < sent.get(share, 0):
            counts[share] += 1
            out.append(message)
    return out


class _Watcher:
    """Consumes the output topic live and notes when each aggregate first appears.

    Read committed: an aggregate counts as visible when a downstream reader can see it, i.e.
    once the sink's transaction for it is committed (not when its message is stored)."""

    def __init__(self, towers: str, topic: str, timings: Timings, security: KeyFiles) -> None:
        self._towers = towers
        self._security = security
        self._topic = topic
        self._timings = timings
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="pipeline-watcher", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from dafka import ConsumerSettings, ReadCommittedConsumer

        settings = ConsumerSettings(
            towers=self._towers, **self._security.fields(), offset_reset="earliest"
        )
        try:
            with ReadCommittedConsumer([self._topic], settings=settings) as consumer:
                while not self._stop.is_set():
                    records = consumer.poll(timeout=0.2)
                    now = time.time()
                    for record in records:
                        try:
                            row = json.loads(record.value)
                            key = (int(row["window_start"]), str(row["device"]))
                        except (ValueError, KeyError, TypeError):
                            continue  # the checks report malformed output
                        self._timings.appeared.setdefault(key, now)
                        self._timings.last_output = now
        except BaseException as exc:  # reported in the summary, never fatal to the run
            self.error = exc

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


class Runner:
    def __init__(self, options: RunOptions, display: Display) -> None:
        self.options = options
        self.display = display
        self.events: queue.Queue[Event] = queue.Queue()
        self.state = State(options.input_topic)
        self.timings = Timings()
        self.phase = "starting"
        self.interrupted = threading.Event()
        self.job: Child | None = None
        self.producers: list[Child] = []
        self.cluster: object | None = None
        self.store_killed = False
        self.job_killed = False
        self.job_failures = 0
        self.notes: list[str] = []
        self._size: int | None = None
        self._feed_stopped: set[str] = set()  # producers sent SIGTERM (Ctrl-C)
        self._event_log: IO[str] | None = None

    # -- the run ---------------------------------------------------------------------------

    def run(self) -> Summary:
        options = self.options
        options.data_dir.mkdir(parents=True, exist_ok=True)
        previous = signal.signal(signal.SIGINT, self._on_sigint)
        try:
            towers = options.towers or self._start_cluster()
            return self._run_with(towers)
        finally:
            signal.signal(signal.SIGINT, previous)
            self._stop_children()
            self._stop_cluster()
            if self._event_log is not None:
                self._event_log.close()

    def _on_sigint(self, _signum: int, _frame: FrameType | None) -> None:
        """Ctrl-C: while the feed is produced, the first one stops it and the run drains and
        checks what was sent (``--forever``'s end); at any other phase - and a second one -
        the run stops at once without checks. (The first one was only noted before: during
        "starting Spark" it did nothing until the feed began.)"""
        if self.phase == "producing" and not self.interrupted.is_set():
            self.interrupted.set()
            return
        self.interrupted.set()
        raise Interrupted(self.phase)

    def _start_cluster(self) -> str:
        from dafka.server import LocalCluster

        self.phase = "starting the cluster"
        self.display(self.state, self.phase, self.timings)
        security = self.options.security
        cluster = LocalCluster(
            self.options.data_dir / "cluster",
            stores=2,
            beacon_interval=0.5,
            key=security.key,
            authorized_keys=security.authorized_keys,
            tower_key=security.tower_key,
            acl=security.acl,
        )
        cluster.start()
        self.cluster = cluster
        return cluster.towers

    def _stop_cluster(self) -> None:
        from dafka.server import LocalCluster

        if isinstance(self.cluster, LocalCluster):
            self.cluster.stop()
        self.cluster = None

    def _run_with(self, towers: str) -> Summary:
        options = self.options
        devices_file = options.data_dir / f"devices-{options.run_id}.json"
        devices_file.write_text(
            "".join(
                json.dumps({"device": d.device, "site": d.site, "kind": d.kind}) + "\n"
                for d in reference_table(options.spec.devices)
            )
        )
        job_config = JobConfig(
            towers=towers,
            spark_master=options.spark_master,
            input_topic=options.input_topic,
            output_topic=options.output_topic,
            dead_letter_topic=options.dead_letter_topic,
            parquet_dir=str(options.parquet_dir),
            checkpoint_dir=str(options.data_dir / "checkpoints" / options.run_id),
            devices_file=str(devices_file),
            window_ms=options.window_ms,
            watermark_ms=options.watermark_ms,
            trigger_ms=options.trigger_ms,
            sink=options.sink,
            security=options.security,
        )
        self._start_job(job_config)
        watcher = _Watcher(towers, options.output_topic, self.timings, options.security)
        deadline = time.monotonic() + options.timeout
        self.phase = "starting Spark"
        # The feed starts once every query ran its first micro-batch (empty: Spark's Python
        # workers, state stores and the sink's first resume are then up), not while the job
        # is still cold: that first batch takes 10-40 s on a busy machine, and the windows
        # closed meanwhile measured it, not the job's latency.
        self._wait(
            lambda: (
                self.state.job.running
                and all(q.batches > 0 for q in self.state.job.queries.values())
            ),
            deadline,
            "the Spark job to start",
            job_config,
        )
        start_at = time.time() + 3.0  # the producers start (import, connect) meanwhile
        self.timings.started = start_at
        for p in range(options.producers):
            config = FeedConfig(
                towers=towers,
                topic=options.input_topic,
                spec=options.spec,
                producers=options.producers,
                producer=p,
                name=f"sensors-{options.run_id}-{p}",
                partitions=options.partitions_per_producer,
                rate=options.rate,
                start_at=start_at,
                forever=options.forever,
                security=options.security,
            )
            log = options.data_dir / "logs" / f"producer-{p}-{options.run_id}.log"
            self.producers.append(
                Child(f"producer-{p}", "feed", config.to_json(), log, self.events, options.python)
            )
        self.phase = "producing"
        # every producer started, not only those that reported: stopped at once (Ctrl-C),
        # one is done before another said it is ready
        self._wait(
            lambda: (
                self.state.producers_done
                and all(child.name in self.state.producers for child in self.producers)
            ),
            deadline,
            "the producers",
            job_config,
        )
        self.timings.producing_done = time.time()
        self.timings.lag_at_end = self._lag()
        sent = {
            int(name.rsplit("-", 1)[1]): producer.sent
            for name, producer in self.state.producers.items()
        }
        messages = sent_messages(options, sent)
        want = expected(
            (m.value for m in messages), reference_table(options.spec.devices), options.window_ms
        )
        heads = self.state.heads()
        drain = time.monotonic() + options.drain_timeout
        self.phase = "draining"
        self._wait(
            lambda: all(
                self.state.has_read(q, heads)
                for q in self.state.job.queries
                if self.state.reads_input(q)
            ),
            drain,
            "the job to read everything produced",
            job_config,
        )
        last_end = max((a.window_end for a in want.aggregates), default=options.spec.start_ms)
        heartbeat_ts = last_end + options.watermark_ms + 1
        hb_partition = self._send_heartbeat(towers, heartbeat_ts)
        self.phase = "closing windows"
        self._wait(
            lambda: (
                self.state.has_read("to-topics", {hb_partition: 1})
                and self.state.watermark_passed("to-topics", last_end)
            ),
            drain,
            "the watermark to pass the last window",
            job_config,
        )
        # Every aggregate is committed to the output topic: the Parquet copy, read from it,
        # is complete once to-parquet has read up to the topic's heads now.
        published = self._output_heads(towers)
        self._wait(
            lambda: self.state.has_read("to-parquet", published),
            drain,
            "the Parquet copy to read the output topic to its end",
            job_config,
        )
        self.phase = "stopping"
        self.display(self.state, self.phase, self.timings)
        assert self.job is not None
        self.job.stop(60)
        watcher.stop()
        self.phase = "checking"
        self.display(self.state, self.phase, self.timings)
        return check(
            options,
            towers,
            want,
            messages,
            self.state,
            self.timings,
            watcher_error=watcher.error,
            chaos_done={"job killed": self.job_killed, "store killed": self.store_killed},
            notes=self.notes,
            job_restarts=self.job_failures,
        )

    # -- children --------------------------------------------------------------------------

    def _start_job(self, config: JobConfig) -> None:
        self.state.job.runs += 1
        log = self.options.data_dir / "logs" / f"spark-job-{self.options.run_id}.log"
        self.job = Child("job", "job", config.to_json(), log, self.events, self.options.python)

    def _send_heartbeat(self, towers: str, ts: int) -> str:
        from dafka import Producer

        name = f"sensors-{self.options.run_id}-end"
        with Producer(
            self.options.input_topic,
            towers=towers,
            **self.options.security.fields(),
            name=name,
        ) as producer:
            producer.send(heartbeat(f"end-{self.options.run_id}", ts))
            if producer.flush(timeout=60):
                raise PipelineError("the heartbeat was not stored within 60 s")
            return producer.partitions[0]

    def _output_heads(self, towers: str) -> dict[str, int]:
        """The output topic's partitions and their next offsets, as the stores say now."""
        from dafka.client import HeadWatcher
        from dafka.transport.config import TransportConfig
        from dafka.transport.security import Security

        transport = TransportConfig.for_towers(
            towers, security=Security.from_files(self.options.security)
        )
        topic = self.options.output_topic
        with HeadWatcher([topic], transport) as watcher:
            watcher.wait_quiet(0.5, 30.0, min_stores=1)  # a store greeted it
            heads = watcher.refresh(settle=1.0, timeout=30.0)
        return {p: head + 1 for (t, p), head in heads.items() if t == topic}

    def _stop_feed(self) -> None:
        """SIGTERM to each producer once it said it is ready (its handler installed: one
        signalled earlier died of it, and the run failed on its exit code -15)."""
        for child in self.producers:
            if child.name in self._feed_stopped:
                continue
            if child.name in self.state.producers or not child.running:
                child.signal(signal.SIGTERM)
                self._feed_stopped.add(child.name)

    def _stop_children(self) -> None:
        for child in self.producers:
            child.stop(30)
        if self.job is not None:
            self.job.stop(60)

    # -- the loop --------------------------------------------------------------------------

    def _lag(self) -> int:
        """The largest input lag (offsets stored, not yet read) of the job's queries."""
        return max((self.state.lag(q) or 0 for q in self.state.job.queries), default=0)

    def _sample_lag(self) -> None:
        if self.phase not in ("producing", "draining"):
            return
        now = time.time() - self.timings.started
        samples = self.timings.lag
        if now >= 0 and (not samples or now - samples[-1][0] >= LAG_EVERY):
            samples.append((round(now, 1), self._lag()))

    def _wait(
        self, done: Callable[[], bool], deadline: float, what: str, job_config: JobConfig
    ) -> None:
        next_display = 0.0
        while True:
            self._drain_events()
            self._sample_lag()
            self._chaos(job_config)
            if self.interrupted.is_set() and self.phase.startswith("producing"):
                self.phase = "producing (stopping)"
                self._stop_feed()
            if done():
                return
            failed = self._failure(job_config)
            if failed:
                raise PipelineError(failed)
            if time.monotonic() > deadline:
                raise PipelineError(f"timed out waiting for {what}")
            now = time.monotonic()
            if now >= next_display:
                self.display(self.state, self.phase, self.timings)
                next_display = now + 0.25
            try:
                name, event = self.events.get(timeout=0.1)
            except queue.Empty:
                continue
            self._apply(name, event)

    def _drain_events(self) -> None:
        while True:
            try:
                name, event = self.events.get_nowait()
            except queue.Empty:
                return
            self._apply(name, event)

    def _apply(self, name: str, event: dict[str, Any]) -> None:
        """Fold a child's report into the state, and keep it in the run's event log."""
        self.state.apply(name, event)
        if self._event_log is None:
            path = self.options.data_dir / "logs" / f"events-{self.options.run_id}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            self._event_log = path.open("a")
        record = {"t": round(time.time() - self.timings.started, 3), "from": name, **event}
        self._event_log.write(json.dumps(record, default=str) + "\n")
        self._event_log.flush()

    def _failure(self, job_config: JobConfig) -> str | None:
        job = self.state.job
        if self.job is not None and not self.job.running and self.phase != "stopping":
            self._drain_events()
            detail = job.error or f"exit code {self.job.popen.returncode}"
            if self.job_failures < self.options.job_retries:
                # What a Spark deployment does: restart the failed job from its checkpoints
                # (on a busy machine a Python worker can miss Spark's fixed 10 s to connect).
                self.job_failures += 1
                self.notes.append(
                    f"the Spark job failed ({detail.splitlines()[0][:160]}) "
                    "and was restarted from its checkpoints"
                )
                self.job.stop(10)
                self._drain_events()
                job.error = None
                self._start_job(job_config)
                return None
            return f"the Spark job stopped: {detail}\n{self.job.tail()}"
        for child in self.producers:
            state = self.state.producers.get(child.name)
            if not child.running and child.popen.returncode != 0:
                return f"{child.name} failed (exit {child.popen.returncode})\n{child.tail()}"
            if state is not None and not child.running and not state.done:
                self._drain_events()
                if not self.state.producers[child.name].done:
                    return f"{child.name} exited before reporting done\n{child.tail()}"
        return None

    def _chaos(self, job_config: JobConfig) -> None:
        chaos = self.options.chaos
        if (
            chaos.kill_job_after_batches is not None
            and not self.job_killed
            and self.job is not None
            and self.phase in ("producing", "draining")
        ):
            query = self.state.job.queries.get("to-topics")
            if query is not None and query.batches >= chaos.kill_job_after_batches:
                self.job_killed = True
                self.job.signal(signal.SIGKILL)
                self.job.popen.wait()
                self.job.stop(10)
                self._drain_events()
                self.state.job.running = False
                self._start_job(job_config)
        if (
            chaos.kill_store_at is not None
            and not self.store_killed
            and self.cluster is not None
            and self.phase == "producing"
        ):
            total = self._feed_size()
            if total and self.state.sent >= chaos.kill_store_at * total:
                from dafka.server import LocalCluster

                if isinstance(self.cluster, LocalCluster):
                    self.store_killed = True
                    self.cluster.kill("store-0")

    def _feed_size(self) -> int:
        if self.options.forever:
            return 0
        if self._size is None:
            self._size = sum(1 for _ in feed(self.options.spec, False))
        return self._size


__all__ = [
    "LAG_EVERY",
    "Chaos",
    "Interrupted",
    "PipelineError",
    "RunOptions",
    "Runner",
    "Timings",
    "sent_messages",
]
