"""dafka.testing: public helpers for testing node machines and applications without sockets.

* :class:`ManualClock` - virtual monotonic time that jumps to the next deadline;
* :class:`MemoryNetwork` - an in-memory PUB/SUB mesh routing machines' actions by prefix,
  with seeded message loss;
* :class:`ScriptedPeer` - the C suite's test peer: drive one machine message by message;
* :class:`MemoryLog` - the storage engine's API in memory, for stores;
* :func:`lossy_records` - transport loss for a real runner (``NodeRunner(drop_inbound=)``,
  ``Consumer(drop_inbound=)``): drops a seeded share of the RECORDs it receives;
* :func:`crash_mid_commit` - ``TransactionalProducer(commit_fault=)``: SIGKILLs the process
  with a chosen number of a commit's ACKs stored;
* :func:`stop_mid_commit` - ``Consumer(commit_fault=)``: SIGSTOPs the process between a group
  member's ownership check and the write of its commit; ``TransactionalProducer(
  intent_fault=)``: between ``commit_transaction()``'s last ownership check and its INTENT;
* :func:`fail_sink_task` - the Spark sink's ``fault``: the first attempt of a task fails
  after it stored some rows;
* :class:`Hosts` - hosts made of Linux network namespaces joined by a router, with links to
  cut, heal and slow down (root and iproute2; :func:`hosts_problem` says what is missing).
"""

from dafka.testing._clock import ManualClock, Timed
from dafka.testing._crash import (
    CrashMidCommit,
    FailSinkTask,
    StopMidCommit,
    crash_mid_commit,
    fail_sink_task,
    stop_mid_commit,
)
from dafka.testing._faults import LossyRecords, lossy_records
from dafka.testing._hosts import Host, Hosts, HostsError, hosts_problem
from dafka.testing._memory_log import LogContractError, MemoryLog
from dafka.testing._network import MemoryNetwork, NetworkStalledError, NetworkStatistics
from dafka.testing._scripted_peer import ScriptedPeer
from dafka.testing._wire import Delivered, flatten, prefix_of

__all__ = [
    "CrashMidCommit",
    "Delivered",
    "FailSinkTask",
    "Host",
    "Hosts",
    "HostsError",
    "LogContractError",
    "LossyRecords",
    "ManualClock",
    "MemoryLog",
    "MemoryNetwork",
    "NetworkStalledError",
    "NetworkStatistics",
    "ScriptedPeer",
    "StopMidCommit",
    "Timed",
    "crash_mid_commit",
    "fail_sink_task",
    "flatten",
    "hosts_problem",
    "lossy_records",
    "prefix_of",
    "stop_mid_commit",
]
