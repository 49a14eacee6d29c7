"""A ``dafka`` daemon whose node thread crashes once it runs, for the daemon-failure tests.

    python crashing_daemon.py store ARGS...      # a store's runner raises 0.3 s after ready
    python crashing_daemon.py tower ARGS...      # the tower raises on a subscription

The command line is the real one (``dafka.cli.main``); only the crash is added, in the node's
own thread, as a bug or a storage error there would raise it. "crash injected" is printed on
stderr just before, so the test can time the exit from it.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from dafka.cli import main
from dafka.server import _store
from dafka.transport import tower as _tower


class InjectedCrashError(RuntimeError):
    pass


def _announce() -> None:
    print("crash injected", file=sys.stderr, flush=True)


def _crash_store_after_start() -> None:
    original = _store.StoreNode.start

    def start(self: _store.StoreNode, ready_timeout: float | None = 10.0) -> None:
        original(self, ready_timeout)
        runner = self.runner
        assert runner is not None

        def boom(_now: float) -> None:
            _announce()
            raise InjectedCrashError("injected store crash")

        threading.Timer(0.3, runner.post, (boom,)).start()

    _store.StoreNode.start = start  # type: ignore[method-assign]


def _crash_tower_on_subscription() -> None:
    def forward(self: Any, *_: Any) -> None:
        _announce()
        raise InjectedCrashError("injected tower crash")

    _tower.Tower._forward_subscriptions = forward  # type: ignore[method-assign,assignment]


if __name__ == "__main__":
    command = sys.argv[1]
    if command == "tower":
        _crash_tower_on_subscription()
    else:
        _crash_store_after_start()
    sys.exit(main(sys.argv[1:], prog_name="dafka"))
