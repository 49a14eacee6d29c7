"""A store tracks at most ``max_partitions`` partitions (issue 19): a peer inventing
partitions (record 0 of 100,000) gets the new ones beyond refused and counted, while the
partitions already tracked go on being stored."""

from __future__ import annotations

import pytest

from dafka.errors import ConfigError
from dafka.node import Persist, StoreConfig, StoreMachine
from dafka.protocol import Head, Record
from dafka.testing import MemoryLog

WID = "57000000000000000000000000000001"
RID = "52000000000000000000000000000002"


def _persisted(store: StoreMachine) -> set[str]:
    return {a.producer for a in store.take_actions() if isinstance(a, Persist)}


def test_new_partitions_beyond_the_bound_are_refused_and_counted() -> None:
    store = StoreMachine(WID, RID, MemoryLog(), StoreConfig(max_partitions=3, heads_refresh=None))
    for k in range(10):
        store.on_message(Record("t", f"P{k:031d}", 0, b"record 0"), 0.0)
    store.on_message(Head("t", f"Q{0:031d}", 5), 0.0)  # a HEAD would make one too
    assert _persisted(store) == {f"P{k:031d}" for k in range(3)}
    stats = store.statistics()
    assert (stats.partitions, stats.partitions_refused) == (3, 8)
    store.on_message(Record("t", f"P{1:031d}", 1, b"record 1"), 0.1)  # a tracked one goes on
    assert _persisted(store) == {f"P{1:031d}"}


def test_the_bound_is_validated() -> None:
    with pytest.raises(ConfigError, match="max_partitions"):
        StoreConfig(max_partitions=0)
