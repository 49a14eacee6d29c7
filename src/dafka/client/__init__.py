"""The public client API: :class:`Producer` and :class:`Consumer` (blocking, thread-safe)."""

from dafka.client._consumer import Consumer
from dafka.client._producer import Producer
from dafka.client._records import ConsumedRecord

__all__ = ["ConsumedRecord", "Consumer", "Producer"]
