"""The two ways the codec refuses bytes or messages.

Both are :class:`~dafka.errors.DafkaError` (one clause catches everything of ours) and
:class:`ValueError` (what the caller handed over is the problem, not the codec's state).
"""

from __future__ import annotations

from dafka.errors import DafkaError


class EncodeError(DafkaError, ValueError):
    """A message cannot be put on the wire: a field is out of range or of the wrong type.

    Raised before anything is sent, so that a bad message never reaches a peer, where a C node
    would misread it or silently drop it.
    """


class DecodeError(DafkaError, ValueError):
    """Frames received from a peer are not a valid Dafka message.

    ``reason`` says what is wrong in words a log reader understands; ``command`` names the
    command (``"RECORD"``...) when the ID byte was recognised, else it is ``None``. A driver
    counts and drops such messages: a malformed peer must never stop a node.
    """

    def __init__(self, reason: str, command: str | None = None) -> None:
        self.reason = reason
        self.command = command
        super().__init__(f"{command}: {reason}" if command else reason)

    def __reduce__(self) -> tuple[type[DecodeError], tuple[str, str | None]]:
        # Keep both attributes across pickling (multiprocessing, logging handlers).
        return (DecodeError, (self.reason, self.command))


__all__ = ["DecodeError", "EncodeError"]
