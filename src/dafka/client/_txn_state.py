"""The transactional producer's state: an Enum, its transitions as data, checked (pure).

aiokafka's ``TransactionState`` is the model: one state at a time, a table of the moves it
may make, and every public call checked against the states that allow it, so that a wrong
call is a :class:`TransactionError` naming the call, the state and what to do - never a
silent no-op or a half-done commit. The states::

    STARTING --> READY <--> IN_TRANSACTION --> COMMITTING --> READY
                   ^              |                  (the INTENT is written: decided)
                   |              v
                   +--------- ABORTING
    any but CLOSED --> FENCED (another instance took over) --> CLOSED

* ``IN_TRANSACTION``: a failure before the commit point (a flush that timed out) leaves it
  here: ``commit_transaction()`` again or ``abort_transaction()``.
* ``COMMITTING``: the INTENT record (the commit point, docs/exactly-once.md) may be in the
  log, so the transaction is decided: it can only be finished (``commit_transaction()``
  again re-sends the same INTENT and ACKs, which readers take once), never aborted - an
  abort would roll back partitions whose ACK a successor will append from the INTENT.
* ``ABORTING``: the rolling-back ACKs were sent but not all stored; ``abort_transaction()``
  again re-sends the same bytes.
* ``FENCED`` is terminal for writing: every call raises :class:`ProducerFencedError`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from dafka.records import ProducerFencedError, TransactionError


class TransactionState(enum.Enum):
    STARTING = "starting"
    READY = "ready"
    IN_TRANSACTION = "in transaction"
    COMMITTING = "committing"
    ABORTING = "aborting"
    FENCED = "fenced"
    CLOSED = "closed"


S = TransactionState

TRANSITIONS: Mapping[TransactionState, frozenset[TransactionState]] = {
    S.STARTING: frozenset({S.READY, S.FENCED, S.CLOSED}),
    S.READY: frozenset({S.IN_TRANSACTION, S.FENCED, S.CLOSED}),
    # READY directly: a commit of a transaction that wrote nothing has nothing to decide.
    S.IN_TRANSACTION: frozenset({S.COMMITTING, S.READY, S.ABORTING, S.FENCED}),
    S.COMMITTING: frozenset({S.READY, S.FENCED, S.CLOSED}),
    S.ABORTING: frozenset({S.READY, S.FENCED, S.CLOSED}),
    S.FENCED: frozenset({S.CLOSED}),
    S.CLOSED: frozenset(),
}
"""State -> the states it may move to. Closing an open transaction goes through ABORTING."""

CALLS: Mapping[str, frozenset[TransactionState]] = {
    "send": frozenset({S.READY, S.IN_TRANSACTION}),
    "flush": frozenset({S.READY, S.IN_TRANSACTION}),
    "begin_transaction": frozenset({S.READY}),
    "commit_transaction": frozenset({S.IN_TRANSACTION, S.COMMITTING}),
    "abort_transaction": frozenset({S.IN_TRANSACTION, S.ABORTING}),
    "send_offsets_to_transaction": frozenset({S.IN_TRANSACTION}),
}
"""Public call -> the states that allow it."""

_HINTS: Mapping[TransactionState, str] = {
    S.STARTING: "the producer has not finished starting",
    S.READY: "no transaction is open (begin_transaction() opens one)",
    S.IN_TRANSACTION: "a transaction is open (commit_transaction() or abort_transaction())",
    S.COMMITTING: (
        "the transaction passed its commit point (its INTENT record) and can only be "
        "finished: commit_transaction() again, or close() and the next instance with this "
        "transactional_id finishes it"
    ),
    S.ABORTING: "an abort did not finish: abort_transaction() again",
    S.CLOSED: "the transactional producer is closed",
}


class TransactionStatus:
    """The current :class:`TransactionState` and the checks around it. Not thread-safe: the
    producer calls it under its lock."""

    __slots__ = ("_fenced_reason", "state")

    def __init__(self) -> None:
        self.state = S.STARTING
        self._fenced_reason = ""

    def check(self, call: str) -> None:
        """Raise unless ``call`` is allowed now: :class:`ProducerFencedError` once fenced,
        else a :class:`TransactionError` naming the call, the state and the way out."""
        if self.state in CALLS[call]:
            return
        self.raise_if_fenced()
        raise TransactionError(f"{call}() in state {self.state.name}: {_HINTS[self.state]}")

    def move(self, target: TransactionState) -> None:
        """Move to ``target``; a move the table does not allow is a bug of the producer, and
        raises rather than leave it in a state nobody planned."""
        if target not in TRANSITIONS[self.state]:
            raise TransactionError(
                f"internal error: transaction state {self.state.name} cannot become {target.name}"
            )
        self.state = target

    def fence(self, reason: str) -> bool:
        """Fenced (``reason`` is what every later call raises); False if it already was (or
        is closed): the caller releases the producer once."""
        if self.state in (S.FENCED, S.CLOSED):
            return False
        self._fenced_reason = reason
        self.move(S.FENCED)
        return True

    def raise_if_fenced(self) -> None:
        if self.state is S.FENCED:
            raise ProducerFencedError(self._fenced_reason)

    @property
    def fenced(self) -> bool:
        return self.state is S.FENCED


__all__ = ["CALLS", "TRANSITIONS", "TransactionState", "TransactionStatus"]
