"""dafka: a decentralized, durable streaming platform over ZeroMQ.

Layers (see docs/architecture.md): ``protocol`` (wire codec) -> ``node`` (pure state machines)
-> ``transport`` (the only zmq user) -> ``client`` / ``cli``. ``storage`` is the store's
segmented log and ``message`` is Gazette's exactly-once layer; both are pure of networking.
"""

from dafka.errors import DafkaError

__all__ = ["DafkaError", "__version__"]
__version__ = "0.1.0"
