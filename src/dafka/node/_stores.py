"""One store serves a consumer's FETCH range: addressing within the Dafka protocol.

Why. A FETCH (``F`` + producer id) reaches the producer and *every* store reader, and each
answers with the whole range: with two stores a catching-up consumer received every record
twice (190,000 records to deliver 100,000).

How. A consumer learns the stores' reader ids from their STORE-HELLOs (every store greets
every consumer it sees subscribe to ``L`` + its id). For each FETCH it picks one store and
writes the requester field as ``consumer-id@store-reader-id`` (:data:`TARGET_MARK`). Our store
readers recognise the mark: the named store answers (to ``D`` + the plain consumer id), the
others stay silent. The pick is the first store not suspected in an order that starts at a
hash of (topic, partition), so many partitions spread over the stores; a FETCH that makes no
progress by its retry deadline marks its store *suspected* for ``suspect_time`` and the retry
goes to the next store; when every store is suspected, or a window was retried as many times
as there are stores, the FETCH goes out plain (every replier answers). A suspected store is
trusted again when it greets us again (a store that restarts sees our subscription anew) or
after ``suspect_time``.

C peers still work: a C store ignores the mark and answers to ``D`` + the whole requester
string, which our consumer's ``D`` + id subscription receives and accepts (duplicates at
worst, as before); a C consumer never uses the mark and every store answers it, as before.
Producers answer to the whole requester string too (only records they still hold).
"""

from __future__ import annotations

import zlib

from dafka.node._catchup import TARGET_MARK, Cursor


class StoreRouter:
    """The :class:`~dafka.node._catchup.Router` of a consumer: which store answers a FETCH."""

    __slots__ = ("_requester", "_stores", "_suspect", "suspect_time", "suspected")

    def __init__(self, requester: str, suspect_time: float = 10.0) -> None:
        self._requester = requester
        self._stores: list[str] = []
        self._suspect: dict[str, float] = {}
        self.suspect_time = suspect_time
        self.suspected = 0
        """How many times a store was suspected (a FETCH addressed to it timed out)."""

    @property
    def stores(self) -> tuple[str, ...]:
        return tuple(self._stores)

    def greeted(self, store: str) -> None:
        """A STORE-HELLO from ``store``'s reader: it is alive and answers FETCHes."""
        self._suspect.pop(store, None)
        if store not in self._stores:
            self._stores.append(store)
            self._stores.sort()

    def requester(self, cursor: Cursor, now: float) -> str:
        stores = self._stores
        if stores and cursor.attempt < len(stores):
            key = f"{cursor.topic}\0{cursor.producer}".encode("utf-8", "surrogateescape")
            start = zlib.crc32(key)
            suspect = self._suspect
            for i in range(len(stores)):
                store = stores[(start + i) % len(stores)]
                if suspect.get(store, 0.0) <= now:
                    cursor.target = store
                    return f"{self._requester}{TARGET_MARK}{store}"
        cursor.target = ""
        return self._requester

    def failed(self, cursor: Cursor, now: float) -> None:
        self.suspected += 1
        self._suspect[cursor.target] = now + self.suspect_time


def addressed_to(requester: str, reader_id: str) -> str | None:
    """The recipient of a FETCH reply from store ``reader_id``, or None if not ours to answer.

    ``requester`` plain: every store answers it (to ``requester``). ``requester@store``:
    only that store answers, to the plain requester id.
    """
    base, mark, store = requester.partition(TARGET_MARK)
    if not mark:
        return requester
    return base if store == reader_id else None


__all__ = ["StoreRouter", "addressed_to"]
