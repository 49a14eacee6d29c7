"""Long-running Dafka nodes built from a machine, the runner and (for a store) storage.

* :class:`StoreNode` - a store: ``dafka.storage`` under a ``StoreMachine`` on real sockets;
* :class:`StorePersistence` - what the store's runner drives to persist (appends, fsync
  clock, durable sequences back to the machine, the shutdown flush);
* :class:`LocalCluster` - a tower and stores, each in its own supervised process
  (``dafka up``, tests, examples);
* :class:`InProcessCluster` - a tower and stores in this process (the throughput demo);
* :class:`Supervisor` - a daemon restarting itself after a crash (``--restart-on-crash``).
"""

from dafka.server._cluster import InProcessCluster
from dafka.server._persistence import PersistenceStats, StorePersistence
from dafka.server._processes import ClusterError, LocalCluster, Member, free_port_pair
from dafka.server._scrub import Scrubber, ScrubStatistics
from dafka.server._store import StoreNode
from dafka.server._supervise import CRASH_WINDOW, Supervisor

__all__ = [
    "CRASH_WINDOW",
    "ClusterError",
    "InProcessCluster",
    "LocalCluster",
    "Member",
    "PersistenceStats",
    "ScrubStatistics",
    "Scrubber",
    "StoreNode",
    "StorePersistence",
    "Supervisor",
    "free_port_pair",
]
