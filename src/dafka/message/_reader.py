"""Read iterators: bytes of a partition -> envelopes (uncommitted) -> committed envelopes.

:class:`ReadUncommittedIter` decodes a source of ``(offset, bytes)`` chunks with a framing.
It yields every frame: duplicates, uncommitted and rolled-back messages included.

:class:`ReadCommittedIter` composes any iterable of envelopes (typically a
``ReadUncommittedIter``) with a :class:`Sequencer`: it yields each committed message exactly
once, ACKs included as the last message of their transaction. When a commit needs a replay
it calls ``replay(partition, begin, end)`` - the caller's I/O - for the envelopes of that
range; without a ``replay`` function it raises :class:`MustStartReplay` and the caller
hands the envelopes to :meth:`Sequencer.start_replay` before iterating on.

Both iterators are resumable: a :class:`FramingError` raised by ``next()`` concerns one
frame, and the following ``next()`` continues after it. Pass ``on_error`` to have bad frames
reported and skipped instead (``errors`` counts them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

from dafka.message._errors import FramingError, MustStartReplay
from dafka.message._framing import FrameDecoder, Framing
from dafka.message._sequencer import Sequencer
from dafka.message._types import Envelope, Message

__all__ = ["ReadCommittedIter", "ReadUncommittedIter", "ReplayFunc"]

M = TypeVar("M", bound=Message)

ReplayFunc = Callable[[str, int, int], Iterable[Envelope[M]]]
"""Reads ``[begin, end)`` of a partition again, read-uncommitted."""


class ReadUncommittedIter(Generic[M]):
    """Envelopes of every frame of ``source``, a stream of ``(offset, bytes)`` chunks."""

    def __init__(
        self,
        source: Iterable[tuple[int, bytes]],
        framing: Framing[M],
        partition: str,
        *,
        on_error: Callable[[FramingError], None] | None = None,
    ) -> None:
        self._source: Iterator[tuple[int, bytes]] | None = iter(source)
        self._decoder: FrameDecoder[M] = framing.new_decoder()
        self.partition = partition
        self._on_error = on_error
        self.errors = 0
        """Bad frames seen (raised or reported)."""

    def __iter__(self) -> ReadUncommittedIter[M]:
        return self

    def __next__(self) -> Envelope[M]:
        decoder = self._decoder
        while True:
            try:
                frame = decoder.next()
            except FramingError as exc:
                self.errors += 1
                if self._on_error is None:
                    raise
                self._on_error(exc)
                continue
            if frame is not None:
                return Envelope(self.partition, frame[0], frame[1], frame[2])
            if self._source is None:
                raise StopIteration
            chunk = next(self._source, None)
            if chunk is None:
                self._source = None
                decoder.close()
            else:
                decoder.feed(chunk[0], chunk[1])


class ReadCommittedIter(Generic[M]):
    """Committed envelopes of ``envelopes``, sequenced by ``sequencer`` (see module doc)."""

    def __init__(
        self,
        envelopes: Iterable[Envelope[M]],
        sequencer: Sequencer[M] | None = None,
        replay: Callable[[str, int, int], Iterable[Envelope[M]]] | None = None,
    ) -> None:
        self._source = iter(envelopes)
        self.sequencer: Sequencer[M] = Sequencer() if sequencer is None else sequencer
        self._replay = replay

    @classmethod
    def over_stream(
        cls,
        source: Iterable[tuple[int, bytes]],
        framing: Framing[M],
        partition: str,
        sequencer: Sequencer[M] | None = None,
        replay: Callable[[str, int, int], Iterable[Envelope[M]]] | None = None,
        *,
        on_error: Callable[[FramingError], None] | None = None,
    ) -> ReadCommittedIter[M]:
        """Committed envelopes of a byte stream: a :class:`ReadUncommittedIter` composed in."""
        return cls(
            ReadUncommittedIter(source, framing, partition, on_error=on_error), sequencer, replay
        )

    def __iter__(self) -> ReadCommittedIter[M]:
        return self

    def __next__(self) -> Envelope[M]:
        seq = self.sequencer
        # Lean loop: this runs once per message read. ``_emit`` is the sequencer's pending
        # commit (its ``committing`` property, without the property call).
        if seq._emit is not None:
            env = self._step()
            if env is not None:
                return env
        queue = seq.queue_with_uuid
        for uncommitted in self._source:
            queue(uncommitted, uncommitted.message.uuid.int)
            if seq._emit is not None:
                env = self._step()
                if env is not None:
                    return env
        raise StopIteration

    def _step(self) -> Envelope[M] | None:
        try:
            return self.sequencer.step()
        except MustStartReplay as needed:
            if self._replay is None:
                raise
            self.sequencer.start_replay(self._replay(needed.partition, needed.begin, needed.end))
            return self.sequencer.step()
