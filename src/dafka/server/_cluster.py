"""A tower and one or more stores in ONE process, on loopback ports.

For the throughput demo (``dafka bench``), which reads each store's heads directly; everything
else runs :class:`dafka.server.LocalCluster` (a process per member, ~20x faster).
Clients reach it with ``cluster.transport`` (a :class:`TransportConfig` naming its tower).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from dafka.config import tower_spec
from dafka.lifecycle import Running
from dafka.node import StoreConfig
from dafka.server._ports import free_port_pair
from dafka.server._store import StoreNode
from dafka.storage import StorageConfig
from dafka.transport.config import TransportConfig
from dafka.transport.sockets import ZmqContext
from dafka.transport.tower import Tower


class InProcessCluster(Running):
    """``with InProcessCluster(data_dir, stores=2) as cluster: ...``"""

    def __init__(
        self,
        data_dir: Path | str,
        *,
        stores: int = 1,
        host: str = "127.0.0.1",
        tower_port: int | None = None,
        storage_config: StorageConfig | None = None,
        store_config: StoreConfig | None = None,
        beacon_interval: float = 1.0,
        context: ZmqContext | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self._host = host
        port = tower_port or free_port_pair(host)  # not a kernel pick: see free_port_pair
        sub, pub = f"tcp://{host}:{port}", f"tcp://{host}:{port + 1}"
        self._context = context
        self.tower = Tower(sub, pub, context=context)
        self._store_count = stores
        self._storage_config = storage_config
        self._store_config = store_config
        self._beacon_interval = beacon_interval
        self.stores: list[StoreNode] = []
        self.transport = TransportConfig()

    def start(self) -> None:
        self.tower.start()
        self.transport = TransportConfig.for_towers(
            tower_spec(self.tower.sub_endpoint, self.tower.pub_endpoint),
            advertised_host=self._host,
            bind_host=self._host,
            beacon_interval=self._beacon_interval,
        )
        try:
            for i in range(self._store_count):
                store = StoreNode(
                    self.data_dir / f"store-{i}",
                    self.transport,
                    storage_config=self._storage_config,
                    store_config=self._store_config,
                    context=self._context,
                    name=f"store-{i}",
                )
                store.start()
                self.stores.append(store)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for store in self.stores:
            store.stop()
        self.stores.clear()
        self.tower.stop()

    def client_transport(self, **changes: object) -> TransportConfig:
        """The transport settings a client of this cluster uses, with ``changes`` applied."""
        return dataclasses.replace(self.transport, **changes)  # type: ignore[arg-type]


__all__ = ["InProcessCluster"]
