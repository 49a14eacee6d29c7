"""How a transactional ``produce_many`` splits its messages per partition (``_by_partition``).

The grouping sorts positions by partition and keeps a key -> partition cache across calls
(FNV-1a in Python was most of the call's cost per message); it must give what routing each
message on its own gives: FNV-1a of the key modulo the partition count (keyless messages to
the transaction's partition), every partition's messages in call order, each with its own
key and weight - whatever the cache holds from earlier calls, and when it starts over.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dafka.client import _transactions
from dafka.client._transactions import _by_partition
from dafka.message import fnv1a32

pytestmark = pytest.mark.unit

keys_st = st.one_of(st.none(), st.binary(max_size=3))
calls_st = st.lists(st.lists(keys_st, min_size=1, max_size=40), min_size=1, max_size=4)


def naive(
    keys: list[bytes | None], n: int, keyless: int
) -> dict[int, tuple[list[bytes], list[bytes | None], list[int]]]:
    out: dict[int, tuple[list[bytes], list[bytes | None], list[int]]] = {}
    for i, key in enumerate(keys):
        index = keyless if key is None else fnv1a32(key) % n
        group = out.setdefault(index, ([], [], []))
        group[0].append(b"v%d" % i)
        group[1].append(key)
        group[2].append(i)
    return out


@settings(max_examples=300, deadline=None)
@given(calls=calls_st, n=st.integers(1, 5), keyless=st.integers(0, 4), bound=st.integers(1, 8))
def test_grouping_equals_routing_each_message(
    calls: list[list[bytes | None]],
    n: int,
    keyless: int,
    bound: int,
) -> None:
    keyless %= n
    cache: dict[bytes | None, int] = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_transactions, "ROUTE_CACHE", bound)  # the cache starts over often
        largest = 0
        for keys in calls:
            largest = max(largest, len(keys))
            values = [b"v%d" % i for i in range(len(keys))]
            got = _by_partition(values, keys, list(range(len(keys))), n, keyless, cache)
            assert got == naive(keys, n, keyless)
            assert None not in cache
            assert len(cache) <= max(bound, largest)  # bounded: one call may overfill it


def test_a_cached_key_is_not_hashed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    cache: dict[bytes | None, int] = {}
    keys: list[bytes | None] = [b"%d" % i for i in range(100)]
    _by_partition([b"v"] * 100, keys, [1] * 100, 4, 0, cache)
    hashed: list[bytes] = []

    def counting(key: bytes) -> int:
        hashed.append(key)
        return 0

    monkeypatch.setattr(_transactions, "fnv1a32", counting)
    again = _by_partition([b"v"] * 100, keys, [1] * 100, 4, 0, cache)
    assert hashed == []
    assert sum(len(v) for v, _, _ in again.values()) == 100
