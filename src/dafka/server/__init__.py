"""Long-running Dafka nodes built from a machine, the runner and (for a store) storage.

* :class:`StoreNode` - a store: ``dafka.storage`` under a ``StoreMachine`` on real sockets;
* :class:`LocalCluster` - a tower and stores in one process (``dafka up``, the main job,
  tests and benchmarks).
"""

from dafka.server._cluster import LocalCluster
from dafka.server._store import StoreNode

__all__ = ["LocalCluster", "StoreNode"]
