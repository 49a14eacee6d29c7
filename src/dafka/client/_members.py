"""MemberWatcher: the live members of consumer groups, as their MEMBER beats show them.

For ``dafka groups``: a node that only listens (:class:`~dafka.node.GroupWatchMachine` in a
:class:`NodeRunner`); :meth:`MemberWatcher.members` is answered by its thread. Members beat
every ``heartbeat_interval_ms`` (a quarter of the session timeout: 0.5 s by default), so a
watcher that listened a session timeout has heard every live member.
"""

from __future__ import annotations

import time

from dafka.lifecycle import Closing
from dafka.node import GroupWatchMachine
from dafka.protocol import MemberBeat, new_node_id
from dafka.transport.config import TransportConfig
from dafka.transport.runner import Identity, NodeRunner
from dafka.transport.sockets import ZmqContext


class MemberWatcher(Closing):
    """``with MemberWatcher(transport, group="g") as w: w.listen(2.0); w.members()``"""

    def __init__(
        self,
        transport: TransportConfig,
        *,
        group: str | None = None,
        expiry: float = 5.0,
        context: ZmqContext | None = None,
        ready_timeout: float | None = 10.0,
    ) -> None:
        self.node_id = new_node_id()
        self._machine = GroupWatchMachine(group, expiry)
        self._started = time.monotonic()
        self._runner = NodeRunner(
            self._machine, [Identity(self.node_id)], transport, context=context, name="members"
        )
        self._runner.start(ready_timeout)

    def listen(self, seconds: float) -> None:
        """Wait until the watcher has listened ``seconds`` since it started."""
        left = self._started + seconds - time.monotonic()
        if left > 0:
            time.sleep(left)

    def members(self) -> dict[str, list[MemberBeat]]:
        """Per group, the last beat of each live member."""
        return self._runner.call(self._machine.members)

    def close(self) -> None:
        self._runner.stop()


__all__ = ["MemberWatcher"]
