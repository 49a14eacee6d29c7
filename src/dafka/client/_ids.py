"""Node ids: moved to :mod:`dafka.protocol` (``new_node_id``), which every kind of node uses.

Re-exported here for client modules written before the move; new code imports
``dafka.protocol.new_node_id`` (``server`` must not import ``client``: see the import
contract test).
"""

from __future__ import annotations

from dafka.protocol import new_node_id

__all__ = ["new_node_id"]
