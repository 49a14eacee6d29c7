"""Suite-wide pytest configuration.

Tests under ``tests/unit`` are marked ``unit``, tests under ``tests/integration`` are marked
``integration``, tests under ``tests/spark`` ``spark`` and tests under ``tests/hosts`` ``hosts``
(a cluster across network namespaces, as root) automatically, so ``pytest -m unit`` runs the
fast, pure half and ``pytest -m hosts`` the multi-host suite alone.

A run started in the background by a non-interactive shell (``cmd &`` in a script, as a CI
runner may do) inherits SIGINT *ignored*, and an ignored signal survives ``exec``: every CLI
process the tests spawn would then ignore the Ctrl-C that the Ctrl-C tests send it (Python
installs its KeyboardInterrupt handler only when SIGINT is not ignored at start). The suite
restores Python's default handler, so its children start with SIGINT at its default again.
"""

from __future__ import annotations

import signal

import pytest

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = str(item.path)
        if "/tests/unit/" in path:
            item.add_marker(pytest.mark.unit)
        elif "/tests/integration/" in path:
            item.add_marker(pytest.mark.integration)
        elif "/tests/spark/" in path:
            item.add_marker(pytest.mark.spark)
        elif "/tests/hosts/" in path:
            item.add_marker(pytest.mark.hosts)
