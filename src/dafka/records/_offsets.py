"""Committed offsets: the commit records of a consumer group and the fold that reads them.

See docs/groups.md ("Committed offsets"). Dafka has no coordinator to hold a group's
offsets, so they are records like any other, stored and replicated by the stores:

* every committer (a group member's consumer, a transactional producer sending offsets)
  writes to its own partition of :data:`OFFSETS_TOPIC`, named ``f"{group}~{nonce}.0"``
  (a fresh ``nonce`` per committer instance: one writer per partition, and nothing to
  resume);
* each :class:`CommitRecord` is a *snapshot*: every offset that committer has committed
  so far (not only the ones that changed), so a reader needs only the last RECORD of each
  partition, not its history;
* each offset carries a ``tenure`` and a ``version`` that order the commits of one
  (topic, partition) across committers, the tenure first: the tenure is the take under
  which a group member owned the partition when it committed (a hybrid clock read at the
  take, above every tenure the member heard of: ``GroupMember``), so a commit of an owner
  that lost the partition - written late, after a pause between its last ownership check
  and the write - never overrides its successor's, whatever its version; the version
  orders the commits of one tenure, a hybrid clock too, ``max(wall clock in us, highest
  version seen + 1)``;
* a commit sent inside a transaction carries a :class:`TxnRef`: its new offsets count only
  if the transaction log holds that transaction's INTENT (the commit point,
  docs/exactly-once.md) at the named offset; until then (or if it aborted) only its
  ``base`` counts - the snapshot of offsets whose transactions had committed.

:func:`fold_commits` turns the last record of every partition of a group into the group's
committed offsets: per (topic, partition) the one with the highest ``(tenure, version,
writer)``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dafka.errors import DafkaError

OFFSETS_TOPIC = "__dafka_offsets"
"""The topic that holds every group's commit records."""

_SEPARATOR = "~"
_FORMAT = 1

Key = tuple[str, str]


class CorruptCommitError(DafkaError):
    """A RECORD of :data:`OFFSETS_TOPIC` that is not a commit record (never written by
    dafka): a reader counts and skips it."""


def commit_partition(group: str, nonce: str) -> str:
    """The partition of one committer of ``group`` (a producer named ``f"{group}~{nonce}"``,
    partition 0)."""
    return f"{group}{_SEPARATOR}{nonce}.0"


def commit_group(partition: str) -> str | None:
    """The group of a partition of :data:`OFFSETS_TOPIC`, or None if it is not one."""
    if not partition.endswith(".0") or _SEPARATOR not in partition:
        return None
    return partition[:-2].rsplit(_SEPARATOR, 1)[0]


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """Where a group resumes a partition: RECORD ``offset``, skipping its first ``index``
    messages (a batch a poll cut: those were handed out), ordered by ``tenure`` and then
    ``version`` (see the module docstring)."""

    offset: int
    index: int = 0
    version: int = 0
    metadata: str = ""
    tenure: int = 0
    """The take under which the committer owned the partition (0: a commit written without
    one, by an earlier version)."""

    def to_json(self) -> list[Any]:
        out: list[Any] = [self.offset, self.index, self.version, self.metadata]
        if self.tenure:  # without one, the earlier form
            out.append(self.tenure)
        return out


@dataclass(frozen=True, slots=True)
class TxnRef:
    """A commit sent in a transaction: it counts once the transaction log partition ``log``
    of :data:`dafka.records.TXN_TOPIC` holds the INTENT of transaction ``txn`` at offset
    ``at`` (the log's next offset when the offsets were sent: its single writer appends
    nothing else before that INTENT)."""

    log: str
    at: int
    txn: int


@dataclass(frozen=True, slots=True)
class CommitRecord:
    """One committer's snapshot of its committed offsets (see the module docstring)."""

    group: str
    writer: str
    offsets: Mapping[Key, CommittedOffset]
    """Without ``txn``: the committed offsets. With ``txn``: the ones this transaction
    commits (the others are in ``base``)."""
    txn: TxnRef | None = None
    base: Mapping[Key, CommittedOffset] = field(default_factory=dict)
    """With ``txn``: the writer's offsets of transactions known to have committed."""


def _offsets_json(offsets: Mapping[Key, CommittedOffset]) -> list[list[Any]]:
    return [[t, p, *c.to_json()] for (t, p), c in sorted(offsets.items())]


def _offsets_from(doc: Any) -> dict[Key, CommittedOffset]:
    out: dict[Key, CommittedOffset] = {}
    for entry in doc:
        if not isinstance(entry, list) or len(entry) not in (6, 7):
            raise ValueError(
                f"an offset is [topic, partition, offset, index, version, metadata"
                f"(, tenure)], got {entry!r}"
            )
        topic, partition, offset, index, version, metadata, *tenure = entry
        committed = CommittedOffset(
            int(offset), int(index), int(version), str(metadata), int(tenure[0]) if tenure else 0
        )
        if committed.offset < 0 or committed.index < 0 or not 0 <= committed.tenure < 2**62:
            raise ValueError(f"offset, index or tenure out of range in {committed}")
        out[(str(topic), str(partition))] = committed
    return out


def encode_commit(record: CommitRecord) -> bytes:
    """The RECORD content of a commit record (compact JSON)."""
    doc: dict[str, Any] = {
        "type": "commit",
        "v": _FORMAT,
        "group": record.group,
        "writer": record.writer,
        "offsets": _offsets_json(record.offsets),
    }
    if record.txn is not None:
        doc["txn"] = [record.txn.log, record.txn.at, record.txn.txn]
        doc["base"] = _offsets_json(record.base)
    return json.dumps(doc, separators=(",", ":")).encode()


def decode_commit(content: bytes) -> CommitRecord:
    """Inverse of :func:`encode_commit`; :class:`CorruptCommitError` for anything else."""
    try:
        doc = json.loads(content)
        if doc["type"] != "commit" or doc["v"] != _FORMAT:
            raise ValueError(f"not a commit record of format {_FORMAT}")
        txn = None
        base: dict[Key, CommittedOffset] = {}
        if "txn" in doc:
            log, at, number = doc["txn"]
            txn = TxnRef(str(log), int(at), int(number))
            if txn.at < 0 or txn.txn < 0 or not txn.log.endswith(".0"):
                # a slot below 0 would be asked of the log (every head is >= -1)
                raise ValueError(f"a transaction is [log partition, slot >= 0, txn >= 0]: {txn}")
            base = _offsets_from(doc["base"])
        return CommitRecord(
            str(doc["group"]), str(doc["writer"]), _offsets_from(doc["offsets"]), txn, base
        )
    except (ValueError, KeyError, TypeError, ArithmeticError, RecursionError) as exc:
        # ArithmeticError: int() of JSON's Infinity or 1e400; RecursionError: deep nesting
        raise CorruptCommitError(f"offsets record does not decode: {exc}") from None


def visible_offsets(
    record: CommitRecord, committed: Callable[[TxnRef], bool]
) -> Mapping[Key, CommittedOffset]:
    """What ``record`` commits: its offsets, or for a transaction's record its ``base``
    merged with its offsets if ``committed(txn)`` (the INTENT is in the log)."""
    if record.txn is None:
        return record.offsets
    if not committed(record.txn):
        return record.base
    return {**record.base, **record.offsets}


def fold_commits(
    records: Iterable[CommitRecord], committed: Callable[[TxnRef], bool] = lambda _: False
) -> dict[Key, CommittedOffset]:
    """The group's committed offsets from the last record of each of its partitions: per
    (topic, partition) the offset of the highest ``(tenure, version, writer)``: a later
    owner's commits rank above an earlier owner's, whenever they were written."""
    best: dict[Key, tuple[int, int, str, int, int, str, CommittedOffset]] = {}
    for record in records:
        for key, offset in visible_offsets(record, committed).items():
            # the offset itself last: equal (version, writer) never happens between real
            # commits, but the fold must not depend on the order it reads partitions in
            rank = (
                offset.tenure,
                offset.version,
                record.writer,
                offset.offset,
                offset.index,
                offset.metadata,
                offset,
            )
            held = best.get(key)
            if held is None or rank[:6] > held[:6]:
                best[key] = rank
    return {key: rank[6] for key, rank in best.items()}


def undecided_logs(
    records: Iterable[CommitRecord],
    keys: Iterable[Key],
    decided: Callable[[TxnRef], bool | None],
    spare: Callable[[str], bool] = lambda _: False,
) -> dict[str, list[TxnRef]]:
    """The transaction logs a member must fence before it starts ``keys`` from the
    group's commits (docs/groups.md, "Fencing the previous owner's log"): per log, the
    transactions of ``records`` (the last record of each committer partition) that commit
    one of ``keys`` and are undecided - ``decided(ref)`` None: the log does not hold the
    slot yet, so the INTENT may still come, after the taker read the commits, from a
    member paused past its last ownership check. ``spare(log)``: a log this member's own
    producer claimed (its claim already fenced that log's earlier instances; fencing it
    again would fence that producer)."""
    wanted = set(keys)
    out: dict[str, list[TxnRef]] = {}
    for record in records:
        ref = record.txn
        if ref is None or spare(ref.log) or decided(ref) is not None:
            continue
        if wanted.isdisjoint(record.offsets):
            continue
        refs = out.setdefault(ref.log, [])
        if ref not in refs:
            refs.append(ref)
    return out


def fenced_decisions(refs: Iterable[TxnRef], head: int) -> tuple[dict[TxnRef, bool], list[TxnRef]]:
    """What a fence of a log at ``head`` (the highest head the stores answered to the
    fencing claim: nothing its older run sends later is taken) decides of ``refs``, the
    undecided transactions of that log: a slot past ``head`` never holds their INTENT
    (aborted for good: the next instance of the id writes its EPOCH there), one at or
    below it is stored - read it (the second list) before deciding."""
    aborted: dict[TxnRef, bool] = {}
    to_read: list[TxnRef] = []
    for ref in refs:
        if ref.at > head:
            aborted[ref] = False
        else:
            to_read.append(ref)
    return aborted, to_read


def next_version(now_us: int, seen: int) -> int:
    """A commit's version: the wall clock, but above every version seen (hybrid clock)."""
    return max(now_us, seen + 1)


__all__ = [
    "OFFSETS_TOPIC",
    "CommitRecord",
    "CommittedOffset",
    "CorruptCommitError",
    "TxnRef",
    "commit_group",
    "commit_partition",
    "decode_commit",
    "encode_commit",
    "fenced_decisions",
    "fold_commits",
    "next_version",
    "undecided_logs",
    "visible_offsets",
]
