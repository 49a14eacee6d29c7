"""Transport loss for tests and the chaos soak: an injector for ``NodeRunner(drop_inbound=)``.

The injector sees the raw frames of each message a node receives, before the runner
decodes them or groups RECORDs into runs, so that a lossy test exercises the production
receive path on what is left - the same one a real loss would.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence

from dafka.protocol import RECORD_ID


class LossyRecords:
    """Drops a seeded share ``rate`` of the RECORDs (live records, command ``M``) it sees.

    Other messages (DIRECT-RECORDs of a FETCH reply, ACKs, HEADs...) always pass: losing a
    share of every FETCH answer makes a window cost one round trip per loss, a benchmark
    rather than a test. ``seen`` counts the RECORDs it was shown, ``dropped`` those it
    dropped.
    """

    def __init__(self, rate: float, seed: int) -> None:
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"rate must be in [0, 1), not {rate}")
        self.rate = rate
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.seen = 0
        self.dropped = 0

    def __call__(self, frames: Sequence[bytes]) -> bool:
        if frames[0][:1] != RECORD_ID:
            return False
        drop = self._rng.random() < self.rate
        with self._lock:
            self.seen += 1
            self.dropped += drop
        return drop


def lossy_records(rate: float, seed: int) -> LossyRecords:
    """An injector dropping a seeded share ``rate`` of the RECORDs a node receives."""
    return LossyRecords(rate, seed)


__all__ = ["LossyRecords", "lossy_records"]
