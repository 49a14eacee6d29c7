"""The receive watermark of a node's data SUBs (issue 23: a lagging store's memory)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dafka.config import SETTINGS
from dafka.errors import ConfigError
from dafka.server import StoreNode
from dafka.transport.config import TransportConfig


def test_a_receive_watermark_below_one_is_refused() -> None:
    with pytest.raises(ConfigError, match="receive watermark 0"):
        TransportConfig(receive_watermark=0)
    assert TransportConfig(receive_watermark=1).receive_watermark == 1


def test_a_store_defaults_to_the_settings_watermark_and_keeps_a_given_one(tmp_path: Path) -> None:
    default = SETTINGS["store/receive_watermark"].default
    assert default < TransportConfig().high_watermark
    assert StoreNode(tmp_path)._transport.receive_watermark == default
    given = TransportConfig(receive_watermark=7)
    assert StoreNode(tmp_path, given)._transport.receive_watermark == 7
    assert StoreNode(tmp_path, given, receive_watermark=9)._transport.receive_watermark == 9
