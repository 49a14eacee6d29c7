"""FNV-1a and the partition mappings (vectors from EXACTLY-ONCE.md)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from dafka.message import (
    EmptyPartitionsError,
    MappingError,
    fnv1a32,
    modulo_mapping,
    random_mapping,
    rendezvous_mapping,
)


@pytest.mark.parametrize(
    ("data", "expect"),
    [("", 0x811C9DC5), ("a", 0xE40C292C), ("foobar", 0xBF9CF968), (b"foobar", 0xBF9CF968)],
)
def test_fnv1a32_vectors(data: str | bytes, expect: int) -> None:
    assert fnv1a32(data) == expect


def key(message: str) -> str:
    return message


def test_modulo_mapping() -> None:
    parts = ["a", "b", "c"]
    mapping = modulo_mapping(key, lambda: parts)
    assert mapping("foobar") == parts[0xBF9CF968 % 3]
    assert mapping("a") == parts[0xE40C292C % 3]
    assert mapping("") == parts[0x811C9DC5 % 3]


def test_rendezvous_picks_the_greatest_xor_weight() -> None:
    parts = [f"topic/part-{i:03}" for i in range(7)]
    mapping = rendezvous_mapping(key, lambda: parts)
    for k in ["", "a", "foobar", "session-42"]:
        weights = [fnv1a32(k) ^ fnv1a32(p) for p in parts]
        assert mapping(k) == parts[weights.index(max(weights))]


def test_rendezvous_ties_go_to_the_first() -> None:
    mapping = rendezvous_mapping(key, lambda: ["same", "same"])
    assert mapping("x") == "same"
    # Equal weights for the key itself: weight 0 everywhere -> first partition.
    mapping = rendezvous_mapping(key, lambda: ["k", "k"])
    assert mapping("k") == "k"


def test_rendezvous_adding_a_partition_moves_keys_only_onto_it() -> None:
    current = [f"p{i}" for i in range(5)]
    mapping = rendezvous_mapping(key, lambda: current)
    keys = [f"key-{i}" for i in range(2000)]
    before = {k: mapping(k) for k in keys}
    current = [*current, "p5"]  # The partitions function now returns a new list.
    after = {k: mapping(k) for k in keys}
    moved = [k for k in keys if before[k] != after[k]]
    assert moved
    assert all(after[k] == "p5" for k in moved)
    current = current[:5]  # Removing it moves exactly those keys back.
    assert {k: mapping(k) for k in keys} == before


def test_modulo_follows_a_changing_partition_list() -> None:
    current = ["a", "b"]
    mapping = modulo_mapping(key, lambda: current)
    assert mapping("foobar") == ["a", "b"][0xBF9CF968 % 2]
    current = ["a", "b", "c"]
    assert mapping("foobar") == ["a", "b", "c"][0xBF9CF968 % 3]


def test_random_mapping_is_roughly_uniform() -> None:
    mapping = random_mapping(lambda: ["a", "b", "c", "d"], random.Random(1))
    counts = Counter(mapping(None) for _ in range(4000))
    assert set(counts) == {"a", "b", "c", "d"}
    assert all(800 < c < 1200 for c in counts.values())


@pytest.mark.parametrize(
    "make",
    [
        lambda: modulo_mapping(key, list),
        lambda: rendezvous_mapping(key, list),
        lambda: random_mapping(list),
    ],
)
def test_empty_partitions_is_a_typed_error(make: object) -> None:
    assert callable(make)
    mapping = make()
    with pytest.raises(EmptyPartitionsError) as info:
        mapping("k")
    assert isinstance(info.value, MappingError)
