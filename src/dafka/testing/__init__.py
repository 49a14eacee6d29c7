"""dafka.testing: public helpers for testing node machines and applications without sockets.

* :class:`ManualClock` - virtual monotonic time that jumps to the next deadline;
* :class:`MemoryNetwork` - an in-memory PUB/SUB mesh routing machines' actions by prefix,
  with seeded message loss;
* :class:`ScriptedPeer` - the C suite's test peer: drive one machine message by message;
* :class:`MemoryLog` - the storage engine's API in memory, for stores.
"""

from dafka.testing._clock import ManualClock, Timed
from dafka.testing._memory_log import LogContractError, MemoryLog
from dafka.testing._network import MemoryNetwork, NetworkStalledError, NetworkStatistics
from dafka.testing._scripted_peer import ScriptedPeer
from dafka.testing._wire import Delivered, flatten, prefix_of

__all__ = [
    "Delivered",
    "LogContractError",
    "ManualClock",
    "MemoryLog",
    "MemoryNetwork",
    "NetworkStalledError",
    "NetworkStatistics",
    "ScriptedPeer",
    "Timed",
    "flatten",
    "prefix_of",
]
