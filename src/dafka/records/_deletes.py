"""Topic deletes: the tombstone a store applies, as a RECORD of the control topic.

A delete is announced the way records are: as a RECORD of ``DELETE_TOPIC`` (plain content,
no batch), which every store stores, replicates and ACKs like any other. A store applies a
tombstone when it stores it (``dafka.server``), and a store that was down during the delete
fetches it from the others when it comes back (the control topic is one whose heads every
store asks for), then applies it. Content::

    DFKDEL1\\n{"topic": "orders", "cuts": {"w1.0": 41, "w1.1": 17}}

``cuts``: per partition, the last sequence deleted - the head the deleting client saw. A
record after it (a producer still writing) is kept.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

DELETE_TOPIC = "__dafka_deletes"
"""The control topic of topic deletes."""

_MAGIC = b"DFKDEL1\n"


@dataclass(frozen=True, slots=True)
class TopicDelete:
    """A tombstone: delete ``topic``'s records up to ``cuts[partition]`` in each partition."""

    topic: str
    cuts: Mapping[str, int]


def encode_delete(delete: TopicDelete) -> bytes:
    body = {"topic": delete.topic, "cuts": dict(sorted(delete.cuts.items()))}
    return _MAGIC + json.dumps(body).encode()


def decode_delete(content: bytes) -> TopicDelete | None:
    """The tombstone in ``content``; None if it is not one (the caller counts and logs)."""
    if not content.startswith(_MAGIC):
        return None
    try:
        body = json.loads(content[len(_MAGIC) :])
        topic = body["topic"]
        cuts = body["cuts"]
        if not isinstance(topic, str) or not topic or not isinstance(cuts, dict):
            return None
        checked: dict[str, int] = {}
        for partition, cut in cuts.items():
            if not partition or isinstance(cut, bool) or not isinstance(cut, int):
                return None
            if not 0 <= cut < 1 << 64:
                return None
            checked[partition] = cut
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return TopicDelete(topic, checked)


__all__ = ["DELETE_TOPIC", "TopicDelete", "decode_delete", "encode_delete"]
