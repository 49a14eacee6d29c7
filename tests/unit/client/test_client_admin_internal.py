"""``Admin.delete_topic`` refuses dafka's internal topics before joining the cluster: deleting
``__dafka_offsets`` wiped every group's commits (a group member then waited for them
forever), and ``__dafka_deletes`` raised a bare ValueError (a traceback on the CLI)."""

from __future__ import annotations

import pytest

from dafka import Admin, ConfigError
from dafka.client._admin import INTERNAL_PREFIX
from dafka.records import DELETE_TOPIC, OFFSETS_TOPIC, TXN_TOPIC

INTERNAL = [OFFSETS_TOPIC, DELETE_TOPIC, TXN_TOPIC, "__dafka_spark"]


@pytest.mark.parametrize("topic", INTERNAL)
def test_internal_topics_are_refused_with_a_config_error_naming_them(topic: str) -> None:
    assert topic.startswith(INTERNAL_PREFIX)
    # port 1: nothing listens there; the refusal comes before any joining
    with pytest.raises(ConfigError, match=f"{topic!r} is an internal topic"):
        Admin(towers="127.0.0.1:1").delete_topic(topic)
