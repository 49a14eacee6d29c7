"""The ``dafka`` command group and its sub-commands."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from dafka import __version__
from dafka.cli._options import transport_config, transport_options
from dafka.cli.daemon import run_until_signal, setup_logging
from dafka.errors import DafkaError


@click.group()
@click.version_option(__version__, prog_name="dafka")
def main() -> None:
    """dafka: decentralized, durable streaming over ZeroMQ."""


@main.command()
@click.option(
    "--sub",
    "sub_address",
    default="tcp://*:5556",
    show_default=True,
    help="tower/sub_address: where nodes send their beacons (XSUB).",
)
@click.option(
    "--pub",
    "pub_address",
    default="tcp://*:5557",
    show_default=True,
    help="tower/pub_address: where nodes receive beacons (XPUB).",
)
@click.option("-v", "--verbose", is_flag=True)
def tower(sub_address: str, pub_address: str, verbose: bool) -> None:
    """Run a tower: the beacon forwarder nodes use to find each other."""
    from dafka.transport.tower import Tower

    setup_logging(verbose)
    t = Tower(sub_address, pub_address)
    run_until_signal(t.start, t.stop)


@main.command()
@click.option(
    "--data",
    "data_dir",
    required=True,
    type=click.Path(path_type=Path),
    help="store/db: the data directory (created if missing).",
)
@click.option(
    "--fsync",
    default="ms:5",
    show_default=True,
    envvar="DAFKA_FSYNC",
    help="When records become durable and are ACKed: batch, records:N, ms:T, os, "
    "or several joined with +.",
)
@transport_options
@click.option("-v", "--verbose", is_flag=True)
def store(
    data_dir: Path,
    fsync: str,
    towers: tuple[str, ...],
    advertise: str,
    bind_host: str,
    beacon_interval: float,
    verbose: bool,
) -> None:
    """Run a store: persist every record of every topic and serve it to consumers."""
    from dafka.server import StoreNode
    from dafka.storage import FsyncPolicy, StorageConfig

    setup_logging(verbose)
    try:
        transport = transport_config(towers, advertise, bind_host, beacon_interval)
        storage_config = StorageConfig(fsync=FsyncPolicy.parse(fsync))
        node = StoreNode(data_dir, transport, storage_config=storage_config)
    except DafkaError as exc:
        raise click.ClickException(str(exc)) from exc
    run_until_signal(node.start, node.stop)


@main.command()
@click.option(
    "--data", "data_dir", default="./dafka-data", show_default=True, type=click.Path(path_type=Path)
)
@click.option(
    "--stores", default=1, show_default=True, type=click.IntRange(0, 64), help="How many stores."
)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option(
    "--port",
    default=5556,
    show_default=True,
    type=click.IntRange(1, 65534),
    help="Tower beacon XSUB port (the XPUB is PORT+1).",
)
@click.option("--fsync", default="ms:5", show_default=True, help="The stores' fsync policy.")
@click.option("-v", "--verbose", is_flag=True)
def up(data_dir: Path, stores: int, host: str, port: int, fsync: str, verbose: bool) -> None:
    """Run a local cluster: a tower and STORES stores, each in its own supervised process.

    A store that dies is restarted (and logged); Ctrl-C stops them all.
    """
    from dafka.server import LocalCluster

    setup_logging(verbose)
    cluster = LocalCluster(
        data_dir,
        stores=stores,
        host=host,
        port=port,
        fsync=fsync,
        echo=lambda line: click.echo(line, err=True),
    )

    def _start() -> None:
        cluster.start()
        lines = [f"dafka up: tower {cluster.towers} (beacons in :{port}, out :{port + 1})"]
        for store in cluster.stores:
            writer, reader = store.ports
            lines.append(
                f"  {store.name}: pid {store.pid}, data {store.data_dir}, "
                f"writer :{writer}, reader :{reader}"
            )
        lines.append(f"clients: --tower {cluster.towers}; Ctrl-C to stop")
        click.echo("\n".join(lines), err=True)

    run_until_signal(_start, cluster.stop)


@main.command()
@click.argument("topic")
@transport_options
@click.option("--flush-timeout", default=30.0, show_default=True)
def produce(
    topic: str,
    towers: tuple[str, ...],
    advertise: str,
    bind_host: str,
    beacon_interval: float,
    flush_timeout: float,
) -> None:
    """Publish each line of standard input as one record of TOPIC."""
    from dafka.client import PartitionProducer

    transport = transport_config(towers, advertise, bind_host, beacon_interval)
    with PartitionProducer(topic, transport) as producer:
        for line in sys.stdin.buffer:
            producer.publish(line.rstrip(b"\n"))
        if not producer.flush(flush_timeout):
            raise click.ClickException(
                f"only {producer.acked} of {producer.next_sequence} records were ACKed "
                f"within {flush_timeout}s"
            )
        click.echo(f"published {producer.next_sequence} records to {topic!r}", err=True)


@main.command()
@click.argument("topics", nargs=-1, required=True)
@transport_options
@click.option("--earliest", is_flag=True, help="Start at the beginning (consumer/offset/reset).")
@click.option("--count", type=int, default=None, help="Exit after this many records.")
def consume(
    topics: tuple[str, ...],
    towers: tuple[str, ...],
    advertise: str,
    bind_host: str,
    beacon_interval: float,
    earliest: bool,
    count: int | None,
) -> None:
    """Print the records of TOPICS, one per line, until Ctrl-C (or --count)."""
    from dafka.client import Consumer
    from dafka.node import ConsumerConfig

    transport = transport_config(towers, advertise, bind_host, beacon_interval)
    config = ConsumerConfig(offset_reset="earliest" if earliest else "latest")
    out = sys.stdout.buffer
    seen = 0
    with Consumer(topics, transport=transport, config=config) as consumer:
        try:
            for record in consumer:
                out.write(record.value + b"\n")
                seen += 1
                if count is not None and seen >= count:
                    break
        except KeyboardInterrupt:
            pass
        out.flush()


@main.command()
@click.option("--records", default=200_000, show_default=True)
@click.option("--size", default=100, show_default=True, help="Record size in bytes.")
@click.option(
    "--data",
    "data_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Where the stores keep their logs (default: a temporary directory).",
)
def demo(records: int, size: int, data_dir: Path | None) -> None:
    """The main job: a local cluster, a producer and a late consumer; prints figures."""
    from dafka.cli._demo import run_demo

    run_demo(records, size, data_dir)


__all__ = ["main"]
