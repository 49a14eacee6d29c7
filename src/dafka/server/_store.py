"""A store node: the storage engine, the store machine and a runner with two identities.

As in the C reference a store has a *writer* (stores records, sends ACK and FETCH) and a
*reader* (answers FETCH, GET-HEADS and CONSUMER-HELLO, sends STORE-HELLO), each with its own
id, beacon and sockets. The reader's PUB is an XPUB so that it sees consumers subscribe to
``L`` + their id and greets them with STORE-HELLO.

The node ids are kept in the data directory (``node-ids``) so that a restarted store comes
back as the same writer and reader: producers and consumers that still know it see a
refresh, not a new peer.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from pathlib import Path

from dafka.config import SETTINGS
from dafka.errors import ConfigError
from dafka.lifecycle import Running
from dafka.node import STORE_WRITER_PREFIXES, STORE_WRITER_SENDS, StoreConfig, StoreMachine
from dafka.protocol import DataMessage, new_node_id
from dafka.records import DELETE_TOPIC
from dafka.server._log_every import LogEvery
from dafka.server._persistence import StorePersistence
from dafka.server._scrub import Scrubber
from dafka.storage import FsyncPolicy, Storage, StorageConfig
from dafka.transport.config import TransportConfig
from dafka.transport.memory import release_free_memory
from dafka.transport.runner import OWNERS_FILE, Identity, NodeRunner
from dafka.transport.sockets import ZmqContext

RECEIVE_WATERMARK: int = SETTINGS["store/receive_watermark"].default
"""Messages a store queues per peer while it lags (``store/receive_watermark``; the
``receive_watermark`` of ``StoreNode`` and of its transport): above it TCP holds RECORDs back
in the producer, whose PUB queues them (up to its ``high_watermark``) and whose unacked
RECORDs are bounded by its in-flight settings. Before, a store's inbound pipes took up to
``high_watermark`` (1,000,000) messages each: 394 MiB at the peak of 1M RECORDs of 100 B
(20,000: 48 MiB; docs/storage.md)."""

FENCE_LOG_INTERVAL = 5.0
"""Seconds between two WARNING lines about records of an older producer run refused."""
TRIM_INTERVAL = 5.0
"""Seconds between two heap trims of a store (a trim of a small heap costs microseconds;
after a burst of small RECORDs it gives back hundreds of MiB: dafka.transport.memory)."""

log = logging.getLogger(__name__)

_IDS_FILE = "node-ids"
_STORES_FILE = "stores-known"
"""The other stores this one counts (reader ids, one per line), rewritten when one joins and
every ``_STORES_WRITE_INTERVAL`` seconds while any is counted: its age says how long ago
they were known. A restart counts them again for ``stores_remembered`` seconds."""
_STORES_WRITE_INTERVAL = 10.0


def _load_stores(data_dir: Path, remembered: float) -> list[str]:
    """The stores kept in ``stores-known``, if it was written less than ``remembered``
    seconds ago (unreadable: none, logged - only a count that waits longer is lost)."""
    path = data_dir / _STORES_FILE
    try:
        age = time.time() - path.stat().st_mtime
        if age > remembered:
            return []
        return [s for s in path.read_text(encoding="ascii").split() if _plain_id(s)]
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("%s unreadable (%s): no store remembered", path, exc)
        return []


def _save_stores(data_dir: Path, stores: Sequence[str]) -> None:
    """Only ids a line holds as they are (printable ASCII, no space): a peer's ``W``
    subscription names the store it counts, and a hostile node's garbage there crashed the
    store's thread at this write (UnicodeEncodeError, found by the chaos soak)."""
    path = data_dir / _STORES_FILE
    tmp = path.with_suffix(".tmp")
    kept = [s for s in stores if _plain_id(s)]
    tmp.write_text("".join(f"{s}\n" for s in kept), encoding="ascii")
    tmp.replace(path)


def _plain_id(text: str) -> bool:
    return text.isascii() and text.isprintable() and not any(c.isspace() for c in text)


def _load_ids(data_dir: Path) -> tuple[str, str]:
    path = data_dir / _IDS_FILE
    if path.exists():
        parts = path.read_text().split()
        if len(parts) != 2:
            raise ConfigError(f"{path} is corrupt: expected a writer id and a reader id")
        return parts[0], parts[1]
    ids = new_node_id(), new_node_id()
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"{ids[0]}\n{ids[1]}\n")
    tmp.replace(path)
    return ids


_WRITER_SEND_CLASSES = frozenset(STORE_WRITER_SENDS)


def _route_send(message: DataMessage) -> int:
    """0 (writer PUB) or 1 (reader PUB): one set lookup per message, as the reader sends
    every DIRECT-RECORD of a FETCH reply through here (``isinstance`` with a tuple cost
    more)."""
    return 0 if message.__class__ in _WRITER_SEND_CLASSES else 1


def _route_subscribe(prefix: bytes) -> int:
    return 0 if prefix[0] in STORE_WRITER_PREFIXES else 1


class StoreNode(Running):
    """A running store; ``start()`` recovers the data directory and joins the cluster."""

    def __init__(
        self,
        data_dir: Path | str,
        transport: TransportConfig | None = None,
        *,
        storage_config: StorageConfig | None = None,
        store_config: StoreConfig | None = None,
        context: ZmqContext | None = None,
        name: str = "store",
        receive_watermark: int | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        transport = transport or TransportConfig()
        if receive_watermark is None:
            receive_watermark = transport.receive_watermark or RECEIVE_WATERMARK
        self._transport = dataclasses.replace(transport, receive_watermark=receive_watermark)
        self._storage_config = storage_config or StorageConfig(fsync=FsyncPolicy.interval(5))
        config = store_config or StoreConfig()
        if DELETE_TOPIC not in config.ask_topics:  # tombstones reach a store that was down
            config = dataclasses.replace(config, ask_topics=(*config.ask_topics, DELETE_TOPIC))
        if config.peers_settle is None:  # the time to hear every store: two beacon intervals
            config = dataclasses.replace(config, peers_settle=2 * transport.beacon_interval)
        self._store_config = config
        self._context = context
        self._name = name
        self.storage: Storage | None = None
        self.runner: NodeRunner | None = None
        self.machine: StoreMachine | None = None
        self.persistence: StorePersistence | None = None
        self.scrubber: Scrubber | None = None
        self.writer_id = ""
        self.reader_id = ""

    def start(self, ready_timeout: float | None = 10.0) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        storage = Storage.open(self.data_dir / "log", self._storage_config)
        report = storage.recovery_report
        log.info("%s: storage at %s recovered: %s", self._name, self.data_dir, report)
        self.writer_id, self.reader_id = _load_ids(self.data_dir)
        self.storage = storage
        self.machine = StoreMachine(
            self.writer_id,
            self.reader_id,
            storage,
            self._store_config,
            now=time.monotonic(),
            wall=time.time(),
        )
        remembered = _load_stores(self.data_dir, self._store_config.stores_remembered)
        self.machine.remember_stores(remembered, time.monotonic())
        self._stores_saved = (self.machine.stores_changed, time.monotonic())
        self.persistence = StorePersistence(storage, self.machine, self._name)
        self._reapply_deletes(storage, self.persistence)
        self.scrubber = Scrubber(storage, self._storage_config.scrub_bytes_per_s)
        self.runner = NodeRunner(
            self.machine,
            [Identity(self.writer_id, held=True), Identity(self.reader_id, xpub=True)],
            self._transport,
            context=self._context,
            persistence=self.persistence,
            route_send=_route_send,
            route_subscribe=_route_subscribe,
            after_turn=self._after_turn,
            name=self._name,
            owners=self.data_dir / OWNERS_FILE,
        )
        self._retention_due = 0.0
        self._trim_due = 0.0
        self._fenced_log = LogEvery(FENCE_LOG_INTERVAL)
        self._refused_log = LogEvery(FENCE_LOG_INTERVAL)
        try:
            self.runner.start(ready_timeout)
        except BaseException:
            storage.close()
            raise
        log.info(
            "%s: ready (writer %s, reader %s, ports %s)",
            self._name,
            self.writer_id,
            self.reader_id,
            self.runner.ports,
        )

    @staticmethod
    def _reapply_deletes(storage: Storage, persistence: StorePersistence) -> None:
        """The tombstones this store holds, applied again (a crash may have come between
        storing one and applying it; applying one twice changes nothing)."""
        for partition in storage.partitions(DELETE_TOPIC):
            first = storage.start_offset(DELETE_TOPIC, partition) or 0
            while True:
                at, contents = storage.read_contents(DELETE_TOPIC, partition, first, 1024)
                if not contents:
                    break
                persistence.apply_deletes(contents, time.monotonic())
                first = at + len(contents)

    def _keep_stores(self, machine: StoreMachine, now: float) -> None:
        """Rewrite ``stores-known`` when a store joined, and every
        ``_STORES_WRITE_INTERVAL`` while any is counted (a failed write is logged: the
        file only makes a restart wait for them)."""
        changed, written = self._stores_saved
        if changed == machine.stores_changed and now < written + _STORES_WRITE_INTERVAL:
            return
        self._stores_saved = (machine.stores_changed, now)
        stores = machine.known_stores
        if stores or changed != machine.stores_changed:
            try:
                _save_stores(self.data_dir, stores)
            except (OSError, ValueError) as exc:
                log.warning("%s: %s not written: %s", self._name, _STORES_FILE, exc)

    def _after_turn(self, now: float) -> None:
        """Retention, the scrub, the heap trim and the log lines about refused records and
        fences (at most every ``FENCE_LOG_INTERVAL``), after each turn of the runner (in its
        thread)."""
        self._retention_turn(now)
        machine = self.machine
        if machine is not None:
            self._keep_stores(machine, now)
            self._log_fences(machine, now)
        if self.scrubber is not None:
            self.scrubber.turn(now)
        if now >= self._trim_due:
            self._trim_due = now + TRIM_INTERVAL
            release_free_memory()

    def _log_fences(self, machine: StoreMachine, now: float) -> None:
        """The WARNING lines about refused records and fences: at most one of each every
        ``FENCE_LOG_INTERVAL``, with the count since the last one."""
        fenced = self._fenced_log.take(machine.records_fenced, now)
        if fenced:
            log.warning(
                "%s: %d record(s) or head(s) of an older producer run refused since the "
                "last line (a newer run of the producer started at or before them); last: %s",
                self._name,
                fenced,
                machine.last_fenced,
            )
        refused = self._refused_log.take(machine.fences_refused, now)
        if refused:
            log.warning(
                "%s: %d fencing GET-HEADS refused since the last line (its run's epoch is "
                "too far past this store's clock: a sender's clock far ahead, or a forged "
                "fence); nothing fenced, the heads answered; last: %s",
                self._name,
                refused,
                machine.last_fence_refused,
            )

    def _retention_turn(self, now: float) -> None:
        """Apply retention every ``retention_check_s`` (in the runner thread, after a turn).

        Turns happen at least once per beacon interval, which bounds the lateness. A
        ``StorageIOError`` here is a node failure like any other (the daemon exits).
        """
        storage = self.storage
        if storage is None or now < self._retention_due:
            return
        self._retention_due = now + self._storage_config.retention_check_s
        moved = storage.apply_retention(time.time())
        for (topic, partition), start in sorted(moved.items()):
            log.info("%s: retention: %s/%s now starts at %d", self._name, topic, partition, start)

    def stop(self) -> None:
        """Stop: the runner flushes the storage and sends the last ACKs, then it closes."""
        if self.runner is not None:
            self.runner.stop()
            self.runner = None
        if self.storage is not None:
            self.storage.close()
            self.storage = None
        log.info("%s: stopped", self._name)

    def health(self) -> str | None:
        """None while it runs; why not otherwise (the daemons' /healthz)."""
        runner = self.runner
        if runner is None:
            return "stopped"
        error = runner.failure.error
        return None if error is None else f"failed: {error}"

    def heads(self, topic: str) -> dict[str, int]:
        """Durable heads of ``topic`` (thread-safe: asks the runner thread)."""
        runner, storage = self.runner, self.storage
        if runner is None or storage is None:
            return {}
        return runner.call(lambda _now: dict(storage.heads(topic)))


__all__ = ["StoreNode"]
