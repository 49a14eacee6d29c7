"""Suite-wide pytest configuration.

Tests under ``tests/unit`` are marked ``unit``, tests under ``tests/integration`` are marked
``integration`` and tests under ``tests/spark`` ``spark`` automatically, so ``pytest -m unit``
runs the fast, pure half.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = str(item.path)
        if "/tests/unit/" in path:
            item.add_marker(pytest.mark.unit)
        elif "/tests/integration/" in path:
            item.add_marker(pytest.mark.integration)
        elif "/tests/spark/" in path:
            item.add_marker(pytest.mark.spark)
