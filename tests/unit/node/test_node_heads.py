"""HeadsMachine: heads of a topic's partitions from HEAD / DIRECT-HEAD, without the data."""

from __future__ import annotations

import re

import pytest

from dafka.node import ROUND_ASK_INTERVAL, HeadsMachine
from dafka.node.actions import Send, Subscribe
from dafka.protocol import (
    ConsumerHello,
    DirectHead,
    GetHeads,
    Head,
    HeadsEnd,
    Record,
    StoreHello,
)


def test_subscribe_asks_heads_now_and_every_refresh() -> None:
    m = HeadsMachine("ME", refresh=0.5)
    assert m.take_actions() == [Subscribe(b"EME"), Subscribe(b"LME"), Subscribe(b"AME")]
    m.subscribe("t", 10.0)
    assert m.take_actions() == [Subscribe(b"Ht"), Send(GetHeads("t", "ME"))]
    m.subscribe("t", 10.0)  # twice: nothing more
    assert m.take_actions() == []
    assert m.next_deadline() == 10.5
    m.on_timer(10.4)
    assert m.take_actions() == []
    m.on_timer(10.5)
    assert m.take_actions() == [Send(GetHeads("t", "ME"))]
    assert m.next_deadline() == 11.0


def test_heads_keep_the_highest_and_drop_foreign() -> None:
    m = HeadsMachine("ME")
    m.subscribe("t", 0.0)
    v0 = m.version
    m.on_message(Head("t", "p1", 5), 0.1)
    m.on_message(DirectHead("ME", "t", "p1", 3), 0.1)  # lower: kept 5
    m.on_message(DirectHead("ME", "t", "p2", 0), 0.1)
    m.on_message(DirectHead("MEX", "t", "p3", 9), 0.1)  # prefix leak: not ours
    m.on_message(Head("t2", "p4", 9), 0.1)  # prefix leak: topic t2 while reading t
    m.on_message(Record("t", "p1", 6, b"x"), 0.1)  # never subscribed to data: unexpected
    assert m.heads() == {("t", "p1"): 5, ("t", "p2"): 0}
    assert m.version > v0
    stats = m.statistics()
    assert (stats.partitions, stats.dropped_foreign, stats.dropped_unexpected) == (2, 2, 1)


def test_store_hello_is_answered_with_consumer_hello() -> None:
    m = HeadsMachine("ME")
    m.on_message(StoreHello("ME", "S1"), 0.0)  # no topics yet: nothing to say
    m.take_actions()
    m.subscribe("a", 0.0)
    m.subscribe("b", 0.0)
    m.take_actions()
    m.on_message(StoreHello("ME", "S1"), 0.0)
    m.on_message(StoreHello("OTHER", "S1"), 0.0)
    assert m.take_actions() == [Send(ConsumerHello("S1", "ME", ("a", "b")))]


def test_pattern_finds_topics_by_their_heads() -> None:
    m = HeadsMachine("ME")
    m.take_actions()
    m.watch_matching(lambda t: re.fullmatch("ev-.*", t) is not None, 0.0)
    assert m.take_actions() == [Subscribe(b"H"), Subscribe(b"G")]
    m.on_message(Head("ev-1", "p", 2), 1.0)
    m.on_message(Head("other", "p", 2), 1.0)
    assert m.heads() == {("ev-1", "p"): 2}
    assert m.topics == ("ev-1",)
    assert m.take_actions() == [Send(GetHeads("ev-1", "ME"))]  # no extra H subscription


def test_pattern_finds_topics_whose_producers_are_gone_by_the_stores_get_heads() -> None:
    """Issue 21: a store asks every new peer for the heads of each topic it holds (GET-HEADS):
    a matching topic named there is watched like one found by its HEADs."""
    m = HeadsMachine("ME")
    m.take_actions()
    m.watch_matching(lambda t: re.fullmatch("ev-.*", t) is not None, 0.0)
    m.take_actions()
    m.on_message(GetHeads("ev-gone", "STORE1"), 1.0)
    m.on_message(GetHeads("other", "STORE1"), 1.0)
    assert m.topics == ("ev-gone",)
    assert m.take_actions() == [Send(GetHeads("ev-gone", "ME"))]
    m.on_message(DirectHead("ME", "ev-gone", "p", 7), 1.1)
    assert m.heads() == {("ev-gone", "p"): 7}
    m.on_message(GetHeads("ev-gone", "STORE2"), 1.2)  # known already: nothing more
    assert m.take_actions() == []


def test_refresh_must_be_positive() -> None:
    with pytest.raises(ValueError, match="refresh"):
        HeadsMachine("ME", refresh=0)


def _greeted(stores: tuple[str, ...], topics: tuple[str, ...] = ("t",)) -> HeadsMachine:
    m = HeadsMachine("ME", refresh=5.0)
    for topic in topics:
        m.subscribe(topic, 0.0)
    for store in stores:
        m.on_message(StoreHello("ME", store), 0.0)
    m.take_actions()
    return m


def test_a_round_is_answered_when_every_store_said_that_is_all() -> None:
    m = _greeted(("S1", "S2"), ("t", "u"))
    round_ = m.ask_now(1.0)
    assert m.take_actions() == [Send(GetHeads("t", "ME.1")), Send(GetHeads("u", "ME.1"))]
    m.on_message(DirectHead("ME.1", "t", "p", 4), 1.0)
    for topic in ("t", "u"):
        m.on_message(HeadsEnd("ME.1", topic, "S1", "W1", 1, 2), 1.0)
    m.on_message(HeadsEnd("ME.1", "t", "S2", "W2", 0, 2), 1.0)
    assert m.answered_round < round_  # S2 has not answered u
    assert m.all_ours
    m.on_message(HeadsEnd("ME.1", "u", "S2", "W2", 0, 2), 1.0)
    assert m.answered_round == round_
    assert m.heads() == {("t", "p"): 4}


def test_an_earlier_rounds_or_plain_answer_does_not_answer_a_round() -> None:
    m = _greeted(("S1",))
    m.ask_now(1.0)
    round_ = m.ask_now(2.0)
    m.on_message(HeadsEnd("ME.1", "t", "S1", "W1", 0, 1), 2.0)  # the previous round's
    m.on_message(HeadsEnd("ME", "t", "S1", "W1", 0, 1), 2.0)  # a CONSUMER-HELLO's
    assert m.answered_round < round_
    m.on_message(HeadsEnd("ME.2", "t", "S1", "W1", 0, 1), 2.0)
    assert m.answered_round == round_


def test_a_store_counted_by_another_holds_the_round_and_an_unanswered_round_is_asked_again() -> (
    None
):
    m = _greeted(("S1",))
    round_ = m.ask_now(1.0)
    m.take_actions()
    m.on_message(HeadsEnd("ME.1", "t", "S1", "W1", 0, 2), 1.0)  # S1 knows a second store
    assert m.answered_round < round_
    assert m.next_deadline() == 1.0 + ROUND_ASK_INTERVAL
    m.on_timer(1.0 + ROUND_ASK_INTERVAL)
    assert m.take_actions() == [Send(GetHeads("t", "ME.1"))]  # its SUB may not have been up
    m.on_message(HeadsEnd("ME.1", "t", "S2", "W2", 0, 2), 1.2)  # greeting lost: still a store
    assert m.answered_round == round_
    assert m.stores == 2


def test_a_c_store_is_not_ours_and_never_answers_a_round() -> None:
    m = _greeted(("OURS", "C-STORE"))
    round_ = m.ask_now(1.0)
    m.on_message(HeadsEnd("ME.1", "t", "OURS", "W", 0, 1), 1.0)
    assert not m.all_ours
    assert m.answered_round < round_


def test_a_greeted_stores_first_that_is_all_is_news_for_the_watcher() -> None:
    """A store greets before its heads come (it answers our CONSUMER-HELLO): its first
    HEADS-END is what tells a waiting reader that its answers are in (``all_ours``), so it
    must reach the watcher (a new ``version``) even when it brings no head. Before, it did
    not, and a batch plan waited for quiet alone: on a loaded machine, quiet came between
    the greeting and the heads, and the plan held no partition."""
    m = _greeted(("S1",))
    before = (m.version, m.all_ours)
    m.on_message(HeadsEnd("ME", "t", "S1", "W1", 0, 1), 1.0)  # a CONSUMER-HELLO's answer
    after = (m.version, m.all_ours)
    assert (before[1], after[1]) == (False, True)
    assert after[0] > before[0]
    again = m.version
    m.on_message(HeadsEnd("ME", "t", "S1", "W1", 0, 1), 2.0)  # nothing new
    assert m.version == again
