"""What the runner needs from a node that persists (a store): the ``Persistence`` protocol.

The transport does not know storage. A store hands its runner an object with this surface
(``dafka.server.StorePersistence``) and the runner calls it at fixed points of its turn:
``persist`` for each :class:`~dafka.node.actions.Persist` action, ``report_durable`` after
executing the outbox (what became durable goes back to the machine, whose ACKs are then
executed in the same turn), ``next_deadline`` when it computes its poll timeout (the fsync
clock), ``hold_until`` when it chooses which sockets to poll (the held ones are left unread
until then), and ``flush`` once at shutdown, before the last ACKs are sent.
"""

from __future__ import annotations

from typing import Protocol

from dafka.node.actions import KeepRuns, Persist


class Persistence(Protocol):
    """A node's persistence, driven by its runner thread (never called from another)."""

    def persist(self, action: Persist) -> None:
        """Write ``action``'s records (a failure is the implementation's to count and log)."""

    def keep_runs(self, action: KeepRuns) -> None:
        """Record a partition's runs, setting an older run's records aside first when
        ``action.supersede_from`` says (kept and logged, never deleted)."""

    def report_durable(self, now: float) -> bool:
        """Tell the machine what became durable (syncing what is due at ``now``).

        Returns True if anything did: the machine may then have ACKs to send.
        """

    def next_deadline(self) -> float | None:
        """When ``report_durable`` should next run (a sync is due), or None."""

    def hold_until(self) -> float | None:
        """Until when (clock seconds) records appended now would become durable no sooner
        than records appended then, or None. Meanwhile the runner leaves the SUBs of its
        ``held`` identities unread and reads what arrived there in one turn at that time
        (one wake-up, one append and one ACK for what would otherwise be a turn each)."""

    def flush(self) -> None:
        """Make everything written durable now (shutdown); ``report_durable`` reports it."""


__all__ = ["Persistence"]
