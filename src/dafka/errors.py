"""The root of every error dafka raises on purpose.

One root (``DafkaError``) so that applications can catch everything of ours in one clause;
each package adds a few subclasses that say what the caller can do about it.
"""


class DafkaError(Exception):
    """Base class of all errors raised by dafka."""


class ConfigError(DafkaError, ValueError):
    """A setting is missing, malformed or out of range."""


class NodeFailedError(DafkaError):
    """A node's runner thread died; the node is gone and every later call raises this.

    ``cause`` is the exception that killed it (also chained as ``__cause__``), so that an
    application sees one dafka type whatever broke inside - never a ZeroMQ or codec one.
    """

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.cause = cause
        self.__cause__ = cause


class DataLossError(DafkaError):
    """Records a reader was told exist can no longer be read: gone from every store (damage
    that no store could repair, retention) or never stored, and it was asked to fail rather
    than skip them (``fail_on_data_loss``, the default; the Spark source's
    ``failOnDataLoss``). The one class for the consumer, the CLI and the Spark source.

    The message names the partition and the records (``fact``), then how to go on
    (``remedy``, in the words of the API that raised it: the CLI says its flag);
    ``topic``, ``partition``, ``first`` and ``end`` (the records ``[first, end)``) say it for
    programs, None where unknown."""

    def __init__(
        self,
        fact: str,
        *,
        remedy: str = "",
        topic: str | None = None,
        partition: str | None = None,
        first: int | None = None,
        end: int | None = None,
    ) -> None:
        super().__init__(f"{fact}; {remedy}" if remedy else fact)
        self.fact = fact
        self.remedy = remedy
        self.topic = topic
        self.partition = partition
        self.first = first
        self.end = end


class MessageTooLargeError(DafkaError, ValueError):
    """A message is larger than ``max_message_bytes`` allows (with what its RECORD adds to
    it): refused at the call that tried to send it, nothing queued, the producer unharmed.
    The message says how large it is and the limit."""


__all__ = ["ConfigError", "DafkaError", "DataLossError", "MessageTooLargeError", "NodeFailedError"]
