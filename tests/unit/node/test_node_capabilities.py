"""Issue 8 item 7: optional machine hooks are typed capabilities, declared, never probed.

A driver finds a machine's optional events (``on_records``, ``on_direct_records``,
``on_subscription``, ``on_durable``, ``on_peer``, ``on_message_from``) with ``isinstance``
against the capability protocols of ``dafka.node.actions``. A machine that defines such a
method without declaring the capability would silently never be called: every machine class
must declare exactly the capabilities whose methods it defines.
"""

from __future__ import annotations

import pytest

from dafka.client._topic_machine import TopicProducerMachine
from dafka.node import (
    AttributedMessages,
    ConsumerMachine,
    DirectRecordRuns,
    Discovery,
    DurableNotices,
    GroupConsumerMachine,
    GroupMember,
    HeadsMachine,
    PeerNotices,
    ProducerMachine,
    RecordRuns,
    StoreMachine,
    SubscriptionNotices,
)
from dafka.testing import MemoryLog

CAPABILITIES: dict[type, str] = {
    RecordRuns: "on_records",
    DirectRecordRuns: "on_direct_records",
    SubscriptionNotices: "on_subscription",
    DurableNotices: "on_durable",
    PeerNotices: "on_peer",
    AttributedMessages: "on_message_from",
}
MACHINES = [
    StoreMachine,
    ConsumerMachine,
    ProducerMachine,
    HeadsMachine,
    TopicProducerMachine,
    GroupMember,
    GroupConsumerMachine,
]


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: m.__name__)
@pytest.mark.parametrize("capability", list(CAPABILITIES), ids=lambda c: c.__name__)
def test_a_hook_method_is_a_declared_capability(machine: type, capability: type) -> None:
    method = CAPABILITIES[capability]
    defines = callable(getattr(machine, method, None))
    declares = capability in machine.__mro__
    assert defines == declares, (
        f"{machine.__name__} {'defines' if defines else 'does not define'} {method} but "
        f"{'declares' if declares else 'does not declare'} {capability.__name__}"
    )


def test_drivers_see_the_capabilities_of_instances() -> None:
    store = StoreMachine("W" * 32, "R" * 32, MemoryLog())
    consumer = ConsumerMachine("C" * 32)
    assert isinstance(store, RecordRuns)
    assert isinstance(store, DurableNotices)
    assert isinstance(store, SubscriptionNotices)
    assert isinstance(store, PeerNotices)
    assert not isinstance(store, DirectRecordRuns)
    assert isinstance(consumer, RecordRuns)
    assert isinstance(consumer, DirectRecordRuns)
    assert not isinstance(consumer, DurableNotices)
    assert isinstance(consumer, SubscriptionNotices)  # a store subscribing to its hellos
    assert not isinstance(Discovery(["D" * 32]), RecordRuns)
    assert isinstance(ProducerMachine("t", "P" * 32), AttributedMessages)
    assert not isinstance(store, AttributedMessages)
    assert not isinstance(consumer, AttributedMessages)
