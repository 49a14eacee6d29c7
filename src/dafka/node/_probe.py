"""The probe: single records of chosen partitions at chosen sequences, read by FETCH.

What a timestamp search needs (``dafka.client``'s ``offsets_for_times``): the heads of some
topics (a :class:`~dafka.node.HeadsMachine`: GET-HEADS, HEADs, STORE-HELLO answered with
CONSUMER-HELLO) and, one at a time per partition, the record at a sequence of its choice -
never a whole partition. A probe is a FETCH of one record (``count`` 1) under this node's
own id: the stores (and a live producer still holding it) answer with a DIRECT-RECORD, as
they answer any consumer, so it works with C stores too (nothing is added to the wire).
Several answers to one probe are the same record; the first is kept. A record no one holds
(below a partition's start after retention, or lost) gets no answer: the caller decides how
long to wait - unless a store says where its log starts (LOG-START, our stores): then
:meth:`ProbeMachine.log_starts` knows that nothing below it will come from that store.
"""

from __future__ import annotations

from dafka.node._errors import check_name, check_sequence
from dafka.node._heads import HeadsMachine
from dafka.node.actions import Send, Subscribe
from dafka.protocol import DataMessage, DirectRecord, Fetch, LogStart

ProbeKey = tuple[str, str, int]
"""(topic, partition, sequence)."""


class ProbeMachine(HeadsMachine):
    """A :class:`HeadsMachine` that can also read single records (see the module docstring)."""

    def __init__(self, node_id: str, refresh: float = 0.2) -> None:
        super().__init__(node_id, refresh)
        raw = check_name("probe id", node_id)
        self._out += [Subscribe(b"D" + raw), Subscribe(b"S" + raw)]
        self._asked: set[ProbeKey] = set()
        self._log_starts: dict[tuple[str, str], dict[str, int]] = {}
        """(topic, partition) -> store reader id -> the first sequence it holds."""
        self._found: dict[ProbeKey, bytes] = {}
        self.probes_sent = 0

    def probe(self, topic: str, partition: str, sequence: int, now: float) -> None:
        """Ask for the record at ``sequence`` (again, if asked before and not answered)."""
        del now
        check_name("topic", topic)
        check_name("partition", partition)
        check_sequence("sequence", sequence)
        self._asked.add((topic, partition, sequence))
        self.probes_sent += 1
        self._out.append(Send(Fetch(partition, self.node_id, topic, sequence, 1)))

    def take_found(self) -> dict[ProbeKey, bytes]:
        """The records that answered probes since the last call (each once)."""
        found = self._found
        self._found = {}
        return found

    def log_starts(self) -> dict[tuple[str, str], dict[str, int]]:
        """(topic, partition) -> each store's first sequence held, from its LOG-STARTs."""
        return {key: dict(starts) for key, starts in self._log_starts.items()}

    def on_message(self, message: DataMessage, now: float) -> None:
        if type(message) is LogStart:
            partition = (message.topic, message.producer)
            if message.recipient != self.node_id or partition not in self._heads:
                self._foreign += 1
                return
            starts = self._log_starts.setdefault(partition, {})
            if starts.get(message.store) != message.sequence:
                starts[message.store] = message.sequence
                self.version += 1
            return
        if type(message) is DirectRecord:
            key = (message.topic, message.producer, message.sequence)
            if message.recipient == self.node_id and key in self._asked:
                self._asked.discard(key)
                self._found[key] = message.content
                self.version += 1
            else:
                self._foreign += 1  # not ours, or a repeat of an answered probe
            return
        super().on_message(message, now)


__all__ = ["ProbeKey", "ProbeMachine"]
