"""Permissions where the data is: what a secured node with an ACL takes from whom.

A node given ``--acl`` (``Security.acl``) reads every peer on its own SUB (``PeerSockets``),
connected expecting the key that peer's beacon came with (stamped by the tower from ZAP), so
each message it reads names its sender's key. :meth:`Guard.admit` applies the ACL
(:class:`dafka.config.Acl`) to it before the machine sees it:

* RECORD, HEAD, DIRECT-RECORD, DIRECT-HEAD of topic T: the sender may produce to T, and the
  partition is its own: a partition belongs to the first key that wrote it (the owner is
  remembered; a store persists it in its data directory, ``owners.jsonl``, so a restart keeps
  it); from any other key the message is dropped;
* FETCH of topic T and CONSUMER-HELLO naming T: the sender may consume T; GET-HEADS of T:
  it may consume or produce T (a producer resumes from the heads); a fencing GET-HEADS
  (a named producer's resume, which fences its older runs at the stores): it may produce T
  and owns the producer's partition 0, as a RECORD of it would need;
* ACK, STORE-HELLO, HEADS-END and LOG-START: only from a store key (the producer counts ACKs
  of stores only; a forged "that is all" would end a resume before the stores answered);
* a store key may send anything (stores replicate and serve every topic);
* a tower given the ACL (:meth:`admit_beacon`) forwards only the beacons of keys it names (a
  store, or in a grant): an authorized key with no rights is not found by any node.

Each refusal is counted (``RunnerStats.acl_refused`` outside a key's rights,
``not_owner`` for someone else's partition) and logged once per key and reason.

:meth:`Guard.admit_subscription` decides the data XPUBs' subscriptions (``XPUB_MANUAL``,
the subscriber's key is the notice's ZAP ``User-Id``): the PUB of an identity that publishes
one topic (a producer's partition) serves only keys that may consume it; other PUBs (stores,
consumers) refuse a non-store key's subscription to messages for node ids (``D``, ``E``,
``L``, ``A``, ``S``: direct records and heads, greetings, "that is all", log starts) unless
every node known by its beacon whose id it matches beaconed with that key (so never the
empty prefix, everyone's).

The ACL file and the authorized-keys directory are re-read when they change (checked at
most once a second: when a message, a subscription or a beacon arrives): a new ACL applies
from then on; one that no longer parses is refused with an ERROR line and the last good one
stays.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from dafka.config import Acl
from dafka.errors import ConfigError
from dafka.protocol import (
    DIRECT_HEAD_ID,
    DIRECT_RECORD_ID,
    HEADS_END_ID,
    LOG_START_ID,
    STORE_HELLO_ID,
    Ack,
    ConsumerHello,
    DataMessage,
    DirectHead,
    DirectRecord,
    Fetch,
    GetHeads,
    Head,
    HeadsEnd,
    LogStart,
    MemberBeat,
    Record,
    StoreHello,
)
from dafka.transport._stats import RunnerStats
from dafka.transport.security import KeyRing, Security

log = logging.getLogger("dafka.transport.acl")

_CHECK_EVERY = 1.0
"""Seconds between two looks at the ACL file and the keys directory."""
_MAX_OWNERS = 1_000_000
"""Partitions whose owner is remembered at most; a new partition beyond is refused."""
_MAX_CACHED = 100_000
"""Decisions cached at most (emptied when full, and when the ACL or the keys change)."""
_MAX_LOGGED = 1024
OWNERS_FILE = "owners.jsonl"
"""A store's partition owners, one JSON line each: ``[topic, producer, key]``."""
_DIRECT = (DIRECT_RECORD_ID, DIRECT_HEAD_ID, STORE_HELLO_ID, HEADS_END_ID, LOG_START_ID)
"""Prefixes naming a node id: its direct records and heads, its store greetings and answers."""
_DATA = (Record, Head, DirectRecord, DirectHead)


def _signature(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


class Guard:
    """One node's ACL, its key names and its partition owners (in the runner thread)."""

    def __init__(
        self, security: Security, name: str, stats: RunnerStats, owners: Path | None = None
    ) -> None:
        if security.acl is None:
            raise ConfigError("a guard needs an ACL")
        self._path = security.acl
        self._name = name
        self._stats = stats
        self._keys = KeyRing(security.authorized_keys)
        self._keys.refresh()
        self._acl = Acl.load(self._path)
        self._acl_signature = _signature(self._path)
        self._next_check = 0.0
        self._names: dict[bytes, frozenset[str]] = {}
        self._decisions: dict[tuple[bytes, type, str], bool] = {}
        self._owners: dict[tuple[str, str], bytes] = {}
        self._logged: set[tuple[bytes, str]] = set()
        self._node_keys: dict[str, bytes] = {}
        """Node id -> the key its last beacon came with."""
        self._owners_file = owners
        if owners is not None:
            self._load_owners(owners)

    # -- messages ---------------------------------------------------------------------------

    def refresh(self, now: float) -> None:
        """Look at the ACL file and the keys directory if a second has passed (the runner
        calls it with every beacon it reads, so that a change is applied - and logged - even
        while no data arrives)."""
        if now >= self._next_check:
            self._check_changes(now)

    def admit(self, message: DataMessage, key: bytes | None, now: float) -> bool:
        """Whether the machine may see ``message`` from the peer of Z85 ``key`` (counted and
        logged when not)."""
        if now >= self._next_check:
            self._check_changes(now)
        if key is None:
            return self._refuse(b"?", "acl", "a message from a peer without a key", "")
        cls = message.__class__
        if isinstance(message, ConsumerHello | MemberBeat):
            topic = "\0".join(message.topics)
        elif isinstance(message, StoreHello):
            topic = ""
        else:
            topic = message.topic
        decision = self._decisions.get((key, cls, topic))
        if decision is None:
            decision = self._decide(message, key)
            if len(self._decisions) >= _MAX_CACHED:
                self._decisions.clear()
            self._decisions[(key, cls, topic)] = decision
        if not decision:
            return self._refuse(key, "acl", f"a {cls.__name__} of topic {topic[:64]!r}", topic)
        if isinstance(message, _DATA) and not self._is_store(key):
            return self._owned(key, topic, message.producer)
        if isinstance(message, GetHeads) and message.epoch and not self._is_store(key):
            # a fencing GET-HEADS changes what the stores take: only the producer itself
            # (the owner of its partition 0) may send one, and it must be allowed to produce
            if not self._acl.may_produce(self._names_of(key), topic):
                return self._refuse(
                    key, "acl", f"a fencing GET-HEADS of topic {topic[:64]!r}", topic
                )
            return self._owned(key, topic, message.requester)
        return True

    def admit_beacon(self, key: bytes, now: float) -> bool:
        """Whether a tower forwards a beacon that authenticated with Z85 ``key``: the ACL
        names the key (a store, or in a grant). Counted and logged when not."""
        if now >= self._next_check:
            self._check_changes(now)
        if self._acl.names_any(self._names_of(key)):
            return True
        return self._refuse(key, "acl", "its beacons (the ACL names the key nowhere)", "")

    def admit_subscription(self, prefix: bytes, user_id: str, topic: str, now: float) -> bool:
        """Whether a data XPUB serves ``prefix`` to the subscriber of Z85 ``user_id``;
        ``topic``: the one topic that PUB publishes ("" if several)."""
        if now >= self._next_check:
            self._check_changes(now)
        key = user_id.encode("ascii", "replace")
        if self._is_store(key):
            return True
        names = self._names_of(key)
        if topic:
            allowed = self._acl.may_consume(names, topic)
        elif prefix[:1] in _DIRECT:
            allowed = len(prefix) > 1 and self._own_id(prefix[1:], key)
        else:
            allowed = True
        if not allowed:
            self._refuse(key, "subscription", f"a subscription to {prefix[:64]!r}", topic)
        return allowed

    def note_node(self, node_id: str, key: str) -> None:
        """A beacon: ``node_id`` authenticated with the Z85 ``key`` (stamped by the tower)."""
        keys = self._node_keys
        if node_id not in keys and len(keys) >= _MAX_CACHED:
            keys.clear()  # a bound: live nodes' beacons refill it
        keys[node_id] = key.encode("ascii", "replace")

    def _own_id(self, raw: bytes, key: bytes) -> bool:
        """Whether a subscription to messages for node ids starting with ``raw`` takes only
        the subscriber's own: no node known from its beacon under another key matches. An
        id not seen yet is admitted (its beacon may still be on its way)."""
        start = raw.decode("utf-8", "surrogateescape")
        return all(k == key for n, k in self._node_keys.items() if n.startswith(start))

    # -- rules ------------------------------------------------------------------------------

    def _decide(self, message: DataMessage, key: bytes) -> bool:
        names = self._names_of(key)
        acl = self._acl
        if acl.is_store(names):
            return True
        if isinstance(message, _DATA):
            return acl.may_produce(names, message.topic)
        if isinstance(message, Fetch):
            return acl.may_consume(names, message.topic)
        if isinstance(message, GetHeads):
            return acl.may_consume(names, message.topic) or acl.may_produce(names, message.topic)
        if isinstance(message, ConsumerHello | MemberBeat):  # a group member reads its topics
            return all(acl.may_consume(names, t) for t in message.topics)
        return not isinstance(message, Ack | StoreHello | HeadsEnd | LogStart)  # stores only

    def _is_store(self, key: bytes) -> bool:
        return self._acl.is_store(self._names_of(key))

    def _names_of(self, key: bytes) -> frozenset[str]:
        names = self._names.get(key)
        if names is None:
            names = self._keys.names(key)
            if len(self._names) >= _MAX_CACHED:
                self._names.clear()
            self._names[key] = names
        return names

    def _owned(self, key: bytes, topic: str, producer: str) -> bool:
        partition = (topic, producer)
        owner = self._owners.get(partition)
        if owner == key:
            return True
        if owner is None:
            if len(self._owners) >= _MAX_OWNERS:
                return self._refuse(key, "owner", "a new partition (owner table full)", topic)
            self._owners[partition] = key
            self._save_owner(topic, producer, key)
            return True
        return self._refuse(
            key,
            "owner",
            f"a message for partition {topic[:64]!r}/{producer[:64]!r} of another key "
            f"({owner.decode('ascii', 'replace')})",
            topic,
        )

    def _refuse(self, key: bytes, reason: str, what: str, topic: str) -> bool:
        if reason == "owner":
            self._stats.not_owner += 1
        else:
            self._stats.acl_refused += 1
        logged = (key, reason)
        if logged not in self._logged:
            if len(self._logged) < _MAX_LOGGED:
                self._logged.add(logged)
            log.warning(
                "%s: refused %s from key %s: %s (logged once per key)",
                self._name,
                what,
                key.decode("ascii", "replace"),
                "the partition belongs to another key"
                if reason == "owner"
                else f"not allowed by the ACL {self._path}",
            )
        return False

    # -- reloading --------------------------------------------------------------------------

    def _check_changes(self, now: float) -> None:
        self._next_check = now + _CHECK_EVERY
        changed = self._keys.refresh()
        signature = _signature(self._path)
        if signature != self._acl_signature:
            self._acl_signature = signature
            try:
                self._acl = Acl.load(self._path)
            except ConfigError as exc:
                log.error("%s: %s; keeping the ACL read before", self._name, exc)
            else:
                log.info("%s: ACL %s re-read", self._name, self._path)
                changed = True
        if changed:
            self._names.clear()
            self._decisions.clear()

    # -- owners -----------------------------------------------------------------------------

    def _load_owners(self, path: Path) -> None:
        try:
            lines = path.read_text(encoding="utf-8", errors="surrogateescape").splitlines()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise ConfigError(f"partition owners {path}: cannot read ({exc})") from exc
        bad = 0
        for line in lines:
            try:
                topic, producer, key = json.loads(line)
                if not all(isinstance(v, str) for v in (topic, producer, key)):
                    raise ValueError(line)
            except ValueError:
                bad += 1  # a torn last line after a crash: the partition is claimed again
                continue
            self._owners.setdefault((topic, producer), key.encode("ascii", "replace"))
        if bad:
            log.warning("%s: %s: %d unreadable line(s) skipped", self._name, path, bad)

    def _save_owner(self, topic: str, producer: str, key: bytes) -> None:
        path = self._owners_file
        if path is None:
            return
        line = json.dumps([topic, producer, key.decode("ascii", "replace")]) + "\n"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode("ascii"))
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:  # kept in memory: enforced until a restart
            log.error(
                "%s: cannot record the owner of %r/%r in %s (%s): a restart forgets it",
                self._name,
                topic[:64],
                producer[:64],
                path,
                exc,
            )


__all__ = ["OWNERS_FILE", "Guard"]
