"""What a node state machine asks its driver to do, and the interface every machine offers.

The machines in :mod:`dafka.node` are pure (h11 style): they are fed decoded messages, timer
ticks and events from the driver, always with ``now`` from an injected monotonic clock (seconds,
``float``), and they never touch a socket, a file or the real clock. What they want done
accumulates in an outbox that the driver empties with :meth:`NodeMachine.take_actions` after
each *batch* of inputs: this is what lets a store turn a burst of RECORDs into one
:class:`Persist` (one write) and one ACK per partition, as the C reference does.

The driver (:mod:`dafka.transport`) executes the actions in order:

* :class:`Send` - encode and publish on the node's data PUB socket;
* :class:`Subscribe` / :class:`Unsubscribe` - change the data SUB socket's prefixes;
* :class:`Deliver` - hand a record to the application (consumers);
* :class:`Persist` - append to the store's log; the driver later reports what became durable
  through the store machine's ``on_durable`` so that ACKs cover only durable records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from dafka.protocol import DataMessage


@dataclass(frozen=True, slots=True)
class Send:
    """Publish ``message`` on the data PUB socket."""

    message: DataMessage


@dataclass(frozen=True, slots=True)
class Subscribe:
    """Add ``prefix`` (command ID + topic bytes) to the data SUB socket."""

    prefix: bytes


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    """Remove ``prefix`` from the data SUB socket."""

    prefix: bytes


@dataclass(frozen=True, slots=True)
class Deliver:
    """Hand one record, in order and exactly once per consumer, to the application."""

    topic: str
    producer: str
    sequence: int
    content: bytes


@dataclass(frozen=True, slots=True)
class Persist:
    """Append ``contents`` at sequences ``first_sequence, first_sequence + 1, ...``."""

    topic: str
    producer: str
    first_sequence: int
    contents: tuple[bytes, ...]


Action = Send | Subscribe | Unsubscribe | Deliver | Persist


class NodeMachine(Protocol):
    """The surface every node machine offers its driver."""

    def on_message(self, message: DataMessage, now: float) -> None:
        """Feed one decoded message received on the data SUB socket."""

    def on_timer(self, now: float) -> None:
        """Run whatever timers are due at ``now``."""

    def next_deadline(self) -> float | None:
        """When ``on_timer`` should next be called (monotonic seconds), or None."""

    def take_actions(self) -> list[Action]:
        """Return and clear the outbox."""


__all__ = [
    "Action",
    "Deliver",
    "NodeMachine",
    "Persist",
    "Send",
    "Subscribe",
    "Unsubscribe",
]
