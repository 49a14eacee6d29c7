"""The ``dafka`` command group and its sub-commands.

Every option that is a setting comes from ``dafka.config``'s table (key, flag, environment
variable, default, check); ``--config FILE`` (or ``DAFKA_CONFIG``) supplies values below the
environment and the flags. Errors follow one path (``dafka.cli._errors``).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
from click.core import ParameterSource

from dafka import __version__
from dafka.cli._errors import DafkaGroup, UserError
from dafka.cli._options import (
    Milliseconds,
    SettingType,
    TopicType,
    client_fields,
    json_option,
    log_options,
    metrics_options,
    node_options,
    security_fields,
    security_options,
    setting_option,
    stack,
    storage_config_of,
    storage_options,
    transport_config,
)
from dafka.cli._rights import warn_unless_granted
from dafka.cli.daemon import Exposed, MetricsServerHost, serve, setup_logging
from dafka.config import CONFIG_ENV, KeyFiles, Layers, load
from dafka.errors import ConfigError
from dafka.transport.memory import use_compact_allocator
from dafka.transport.security import Security


def _default_map(group: click.Group, layers: Layers) -> dict[str, dict[str, Any]]:
    """The file's values as click defaults of every command option that is a setting."""
    out: dict[str, dict[str, Any]] = {}
    for name, command in group.commands.items():
        for param in command.params:
            if isinstance(param.type, SettingType) and param.type.setting.key in layers.file:
                value = layers.file[param.type.setting.key]
                out.setdefault(name, {})[param.name or ""] = (
                    [value] if getattr(param, "multiple", False) else value
                )
    return out


@click.group(cls=DafkaGroup)
@click.version_option(__version__, prog_name="dafka")
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path),
    envvar=CONFIG_ENV,
    show_envvar=True,
    help="A TOML file of settings (keys as in `dafka config`); environment and flags win.",
)
@click.pass_context
def main(ctx: click.Context, config_path: Path | None) -> None:
    """dafka: decentralized, durable streaming over ZeroMQ.

    Settings come from defaults < the --config TOML file < DAFKA_* environment variables <
    flags; `dafka config` shows the effective values and where each came from.
    """
    try:
        layers = load(config_path, os.environ)
    except ConfigError as exc:
        raise UserError(str(exc)) from exc
    ctx.obj = layers
    ctx.default_map = _default_map(main, layers)


F = TypeVar("F", bound=Callable[..., Any])


def _restart_option(what: str) -> Callable[[F], F]:
    """``--restart-on-crash N`` of a daemon (``dafka.server.Supervisor``)."""
    return click.option(
        "--restart-on-crash",
        "restart_on_crash",
        type=click.IntRange(0, 1000),
        default=0,
        show_default=True,
        help=f"Run the {what} as a child of this process and start it again when it dies by a "
        "signal (an abort inside libzmq, which a stranger's stream can cause on a plaintext "
        "node: docs/nodes.md), at most N times in 10 minutes, then exit 128 + signal; 0: "
        "run it here, unsupervised.",
    )


def _supervise(name: str, restarts: int, verbose: bool, log_format: str) -> NoReturn:
    """Become the supervisor of this daemon (its command line again, unsupervised)."""
    from dafka.server import Supervisor

    setup_logging(verbose, log_format)
    argv = [*sys.orig_argv, "--restart-on-crash", "0"]  # the last occurrence wins
    sys.exit(Supervisor(name, argv, restarts).run())


@main.command()
@setting_option("tower/sub_address", param="sub_address")
@setting_option("tower/pub_address", param="pub_address")
@security_options
@setting_option(
    "bind",
    param="bind_host",
    help_extra=" For a tower: the host of --sub and --pub when they are not given (other "
    "hosts reach a tower only if it listens beyond loopback).",
)
@metrics_options
@log_options
@_restart_option("tower")
@click.pass_context
def tower(
    ctx: click.Context,
    sub_address: str,
    pub_address: str,
    security: KeyFiles,
    bind_host: str,
    metrics_port: int,
    metrics_host: str,
    log_format: str,
    verbose: bool,
    restart_on_crash: int,
) -> None:
    """Run a tower: the beacon forwarder nodes use to find each other.

    It listens on loopback unless told: --bind ADDRESS (or '*') for a cluster across
    machines, whose nodes then name it --tower ADDRESS:5556 (docs/deploy.md).
    """
    if restart_on_crash:
        _supervise("tower", restart_on_crash, verbose, log_format)
    use_compact_allocator()  # first: it re-executes this process (dafka.transport.memory)
    from dafka.transport.tower import Tower

    if bind_host:
        defaulted = ParameterSource.DEFAULT
        if ctx.get_parameter_source("sub_address") == defaulted:
            sub_address = _with_host(sub_address, bind_host)
        if ctx.get_parameter_source("pub_address") == defaulted:
            pub_address = _with_host(pub_address, bind_host)
    t = Tower(sub_address, pub_address, security=Security.from_files(security))

    def samples() -> Any:
        from dafka.metrics import tower_samples  # prometheus-client: only with a port

        return tower_samples(t)

    serve(
        t,
        verbose=verbose,
        log_format=log_format,
        metrics=MetricsServerHost(metrics_host, metrics_port),
        exposed=Exposed(samples, t.health),
    )


def _with_host(endpoint: str, host: str) -> str:
    """``tcp://HOST:PORT`` with another host (``localhost`` is 127.0.0.1)."""
    port = endpoint.rpartition(":")[2]
    return f"tcp://{'127.0.0.1' if host == 'localhost' else host}:{port}"


@main.command()
@setting_option("store/db", param="data_dir")
@setting_option("store/fsync")
@storage_options
@setting_option("store/receive_watermark")
@setting_option("max_message_bytes")
@setting_option("store/max_partitions")
@node_options
@security_options
@metrics_options
@log_options
@_restart_option("store")
def store(
    data_dir: Path,
    fsync: str,
    segment_bytes: int,
    retention_bytes: int,
    retention_age: float,
    retention_check: float,
    scrub_rate: int,
    receive_watermark: int,
    max_message_bytes: int,
    max_partitions: int,
    towers: tuple[str, ...],
    advertise: str,
    bind_host: str,
    beacon_interval: float,
    security: KeyFiles,
    metrics_port: int,
    metrics_host: str,
    log_format: str,
    verbose: bool,
    restart_on_crash: int,
) -> None:
    """Run a store: persist every record of every topic and serve it to consumers."""
    if restart_on_crash:
        _supervise("store", restart_on_crash, verbose, log_format)
    use_compact_allocator()  # first: it re-executes this process (dafka.transport.memory)
    from dafka.node import StoreConfig
    from dafka.server import StoreNode

    node = StoreNode(
        data_dir,
        transport_config(towers, advertise, bind_host, beacon_interval, security),
        storage_config=storage_config_of(
            fsync, segment_bytes, retention_bytes, retention_age, retention_check, scrub_rate
        ),
        store_config=StoreConfig(
            max_message_bytes=max_message_bytes, max_partitions=max_partitions
        ),
        receive_watermark=receive_watermark,
    )

    def samples() -> Any:
        from dafka.metrics import store_samples  # prometheus-client: only with a port

        return store_samples(node)

    serve(
        node,
        verbose=verbose,
        log_format=log_format,
        metrics=MetricsServerHost(metrics_host, metrics_port),
        exposed=Exposed(samples, node.health),
    )


@main.command()
@setting_option("up/db", param="data_dir")
@setting_option("up/stores")
@setting_option("up/host")
@setting_option("up/port")
@setting_option("store/fsync")
@storage_options
@setting_option("store/receive_watermark")
@setting_option("max_message_bytes")
@setting_option("store/max_partitions")
@setting_option("metrics/port", help_extra=" The tower takes PORT, store i PORT+1+i.")
@security_options
@log_options
def up(
    data_dir: Path,
    stores: int,
    host: str,
    port: int,
    fsync: str,
    segment_bytes: int,
    retention_bytes: int,
    retention_age: float,
    retention_check: float,
    scrub_rate: int,
    receive_watermark: int,
    max_message_bytes: int,
    max_partitions: int,
    metrics_port: int,
    security: KeyFiles,
    log_format: str,
    verbose: bool,
) -> None:
    """Run a local cluster: a tower and STORES stores, each in its own supervised process.

    A store that dies is restarted (and logged); one that keeps dying within seconds of its
    start is given up on and ends the command (exit 1, its last lines); Ctrl-C stops them all.
    """
    from dafka.server import LocalCluster
    from dafka.transport.failure import process_failures

    cluster = LocalCluster(
        data_dir,
        stores=stores,
        host=host,
        port=port,
        fsync=fsync,
        store_settings={
            "store/segment_bytes": segment_bytes,
            "store/retention/bytes": retention_bytes,
            "store/retention/age": retention_age,
            "store/retention/check": retention_check,
            "store/scrub_rate": scrub_rate,
            "store/receive_watermark": receive_watermark,
            "store/max_partitions": max_partitions,
        },
        max_message_bytes=max_message_bytes,
        echo=lambda line: click.echo(line, err=True),
        log_format=log_format,
        metrics_port=metrics_port,  # the members serve their own
        on_failure=process_failures.report,  # a member that keeps dying young ends `up`
        **security_fields(security),
    )

    def announce() -> None:
        lines = [f"dafka up: tower {cluster.towers} (beacons in :{port}, out :{port + 1})"]
        for member in cluster.stores:
            writer, reader = member.ports
            lines.append(
                f"  {member.name}: pid {member.pid}, data {member.data_dir}, "
                f"writer :{writer}, reader :{reader}"
            )
        if metrics_port:
            lines.append(
                f"  metrics: tower http://{host}:{metrics_port}/metrics, store i on port "
                f"{metrics_port}+1+i"
            )
        lines.append(f"clients: --tower {cluster.towers}; Ctrl-C to stop")
        click.echo("\n".join(lines), err=True)

    serve(cluster, verbose=verbose, log_format=log_format, announce=announce)


def _delimiter(text: str) -> bytes:
    raw = text.encode().decode("unicode_escape").encode("latin-1")
    if not raw:
        raise click.BadParameter("the delimiter is empty")
    return raw


@main.command()
@click.argument("topic", type=TopicType())
@node_options
@security_options
@setting_option("producer/flush_timeout")
@click.option("-D", "--delimiter", default="\\n", show_default=True, help="Message delimiter.")
@click.option("-z", "--null", is_flag=True, help="Messages are separated by NUL bytes.")
@click.option(
    "-K",
    "--key-delimiter",
    default=None,
    help="Each message is KEY<DELIM>VALUE (kcat -K).",
)
@click.option(
    "--file",
    "files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Send each file whole as one message (repeatable); stdin is not read.",
)
@setting_option("producer/partitions")
@setting_option("producer/name")
@click.option(
    "--no-batching",
    is_flag=True,
    help="One message per RECORD (readable by C consumers; no key, headers or timestamp).",
)
@setting_option("producer/linger_ms")
@setting_option("producer/batch_size")
@setting_option("producer/max_in_flight")
@setting_option("max_message_bytes")
@setting_option("producer/head_interval")
@setting_option("producer/acks_from")
@metrics_options
@click.option(
    "--transactional-id",
    default=None,
    help="Write in transactions (exactly-once; partitions ID.0..N-1); readers with "
    "--isolation read_committed see only committed messages.",
)
@click.option(
    "--transaction-size",
    type=click.IntRange(min=0),
    default=None,
    help="Messages per transaction; needs --transactional-id (0, the default: the whole "
    "input in one).",
)
def produce(
    topic: str,
    towers: tuple[str, ...],
    advertise: str,
    bind_host: str,
    beacon_interval: float,
    security: KeyFiles,
    flush_timeout: float,
    delimiter: str,
    null: bool,
    key_delimiter: str | None,
    files: tuple[Path, ...],
    partitions: int,
    name: str,
    no_batching: bool,
    linger_ms: float,
    batch_size: int,
    max_in_flight: int,
    max_message_bytes: int,
    head_interval: float,
    acks_from: str,
    metrics_port: int,
    metrics_host: str,
    transactional_id: str | None,
    transaction_size: int | None,
) -> None:
    """Publish standard input to TOPIC, one message per line; exit once all are stored.

    Exits 1 with the count of messages not stored when the stores did not ACK them within
    --flush-timeout seconds of the last progress.
    """
    from dafka.cli._produce import produce as run
    from dafka.cli._produce import produce_transactional as run_transactional
    from dafka.cli._produce import split, with_keys

    separator = b"\0" if null else _delimiter(delimiter)
    keys = _delimiter(key_delimiter) if key_delimiter is not None else None
    if keys is not None and no_batching:
        raise click.UsageError("-K needs batching: a plain RECORD carries no key")
    warn_unless_granted(security, "produce", [topic])
    if transaction_size is not None and transactional_id is None:
        raise click.UsageError(
            "--transaction-size needs --transactional-id: without it nothing is written in "
            "transactions"
        )
    if files:
        messages = with_keys((p.read_bytes() for p in files), keys)
    else:
        messages = with_keys(split(sys.stdin.buffer, separator), keys)
    settings: dict[str, Any] = {
        **client_fields(towers, advertise, bind_host, beacon_interval, security),
        "partitions": partitions,
        "name": name or None,
        "batching": not no_batching,
        "linger_ms": linger_ms,
        "batch_size": batch_size,
        "max_in_flight": max_in_flight,
        "max_message_bytes": max_message_bytes,
        "head_interval": head_interval,
        "acks_from": acks_from,
    }
    if transactional_id is not None:
        if name:
            raise click.UsageError("--name and --transactional-id: the id is the name")
        outcome = run_transactional(
            topic,
            messages,
            flush_timeout,
            transactional_id,
            transaction_size or 0,
            metrics=MetricsServerHost(metrics_host, metrics_port),
            **settings,
        )
    else:
        outcome = run(
            topic,
            messages,
            flush_timeout,
            metrics=MetricsServerHost(metrics_host, metrics_port),
            **settings,
        )
    if outcome.not_stored or outcome.stopped_reading:
        stopped = " (stopped reading input: no room to send)" if outcome.stopped_reading else ""
        unreached = (
            f"; {outcome.unreached} peer(s) found through the towers could not connect back to "
            "this producer: give --bind an address they reach and --advertise the host they "
            "should use (docs/deploy.md)"
            if outcome.unreached
            else ""
        )
        raise click.ClickException(
            f"{outcome.not_stored} of {outcome.sent} messages were not stored within "
            f"{flush_timeout:g}s{stopped}{unreached}"
        )
    if outcome.refused:
        raise click.ClickException(
            f"{outcome.refused} message(s) refused (over --max-message-bytes); the "
            f"{outcome.sent} others were stored"
        )
    if sys.stderr.isatty():
        click.echo(f"{outcome.sent} messages stored in {topic!r}", err=True)


_MAX_SESSION_MS = 3_600_000.0
"""The longest ``--session-timeout`` and ``--heartbeat-interval`` (ms): an hour."""

_SESSION_MS = Milliseconds(100.0, _MAX_SESSION_MS, "session.timeout.ms")
"""``--session-timeout``: from 100 ms - shorter is below a beat's round trip on a busy
host, and a value in seconds (``--session-timeout 4``) is refused, not taken as 4 ms."""

_HEARTBEAT_MS = Milliseconds(10.0, _MAX_SESSION_MS, "heartbeat.interval.ms")
"""``--heartbeat-interval``: from 10 ms - a value in seconds (``--heartbeat-interval 1``)
is refused, not taken as a beat every millisecond."""


@main.command()
@click.argument("topics", nargs=-1, required=True, type=TopicType())
@node_options
@security_options
@click.option(
    "-o",
    "--offset",
    default=None,
    help='Where to start: earliest, latest, or JSON {"topic": {"partition": offset}} '
    "(partitions not named start per --offset-reset; with -G only earliest or latest).",
)
@setting_option("consumer/offset/reset")
@setting_option("consumer/isolation", param="isolation")
@setting_option("max_message_bytes")
@setting_option("consumer/fail_on_data_loss")
@click.option("--earliest", is_flag=True, help="Same as --offset earliest.")
@click.option(
    "-G",
    "--group",
    default=None,
    help="Consume as a member of this consumer group (as kcat -G): start at the group's "
    "committed offsets (--offset-reset, or --offset earliest|latest, only where none), "
    "commit what was written every 5 s and at exit.",
)
@click.option(
    "--session-timeout",
    "session_timeout_ms",
    type=_SESSION_MS,
    default=None,
    help="With -G: milliseconds without a beat after which the member is counted dead and "
    "its partitions move (Kafka's session.timeout.ms; default 2 beacon intervals). A loaded "
    "host wants several seconds: a member starved that long counts itself lost and its "
    "partitions are read again from the group's commits.",
)
@click.option(
    "--heartbeat-interval",
    "heartbeat_interval_ms",
    type=_HEARTBEAT_MS,
    default=None,
    help="With -G: milliseconds between the member's beats (Kafka's heartbeat.interval.ms; "
    "default a quarter of the session timeout); below the session timeout.",
)
@click.option("-c", "--count", type=click.IntRange(min=1), default=None, help="Exit after N.")
@click.option(
    "-e",
    "--exit-at-end",
    is_flag=True,
    help="Exit once caught up with every partition head known (after a few seconds to find them).",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["raw", "json"]),
    default="raw",
    show_default=True,
    help="raw: the value and -D; json: one JSON object per line.",
)
@click.option("-f", "--template", default=None, help="kcat-like template, e.g. '%t %p %o %s\\n'.")
@click.option("-D", "--delimiter", default="\\n", show_default=True, help="After each raw value.")
@metrics_options
@click.option(
    "--from-timestamp",
    type=click.IntRange(min=0),
    default=None,
    help="Start at this time (ms since the epoch): each partition from its first RECORD "
    "stamped at or after it (a binary search, docs/client.md), messages stamped before it "
    "skipped; partitions found later from their start.",
)
def consume(
    topics: tuple[str, ...],
    towers: tuple[str, ...],
    advertise: str,
    bind_host: str,
    beacon_interval: float,
    security: KeyFiles,
    offset: str | None,
    offset_reset: str,
    isolation: str,
    max_message_bytes: int,
    fail_on_data_loss: bool,
    earliest: bool,
    group: str | None,
    session_timeout_ms: float | None,
    heartbeat_interval_ms: float | None,
    count: int | None,
    exit_at_end: bool,
    output_format: str,
    template: str | None,
    delimiter: str,
    from_timestamp: int | None,
    metrics_port: int,
    metrics_host: str,
) -> None:
    """Print the records of TOPICS (data on stdout, diagnostics on stderr)."""
    from dafka.cli import _output
    from dafka.cli._consume import consume as run

    positions = None
    if group is not None and isolation == "read_committed":
        raise click.UsageError("-G/--group reads read_uncommitted (a group commits positions)")
    group_timing = _group_timing(group, session_timeout_ms, heartbeat_interval_ms, beacon_interval)
    if earliest or from_timestamp is not None:
        offset_reset = "earliest"
    if offset in ("earliest", "latest"):
        offset_reset = offset
    elif offset is not None:
        if group is not None:  # the group's commits decide where each partition starts
            raise click.UsageError(
                "-G/--group starts each partition at the group's committed offset: --offset "
                "takes only earliest or latest with it (where the group committed nothing)"
            )
        positions = _output.offsets(offset, topics)
    warn_unless_granted(security, "consume", topics)
    if from_timestamp is not None and from_timestamp < _SECONDS_LOOK_LIKE:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(from_timestamp / 1000))
        click.echo(
            f"Warning: --from-timestamp {from_timestamp} is ms since the epoch ({when} UTC); "
            f"if you meant seconds, pass {from_timestamp * 1000}",
            err=True,
        )
    if template is not None:
        formatter = _output.template(template)
    elif output_format == "json":
        formatter = _output.json_line
    else:
        formatter = _output.raw(_delimiter(delimiter))
    run(
        topics,
        {
            **client_fields(towers, advertise, bind_host, beacon_interval, security),
            "max_message_bytes": max_message_bytes,
        },
        offset_reset=offset_reset,
        start_positions=positions,
        count=count,
        formatter=formatter,
        from_timestamp=from_timestamp,
        exit_at_end=exit_at_end,
        isolation_level=isolation,
        fail_on_data_loss=fail_on_data_loss,
        metrics=MetricsServerHost(metrics_host, metrics_port),
        group_id=group,
        group_timing=group_timing,
    )


def _group_timing(
    group: str | None,
    session_timeout_ms: float | None,
    heartbeat_interval_ms: float | None,
    beacon_interval: float,
) -> dict[str, float]:
    """``--session-timeout`` and ``--heartbeat-interval`` as the consumer's fields, checked
    before the consumer joins the cluster (a usage error, exit 2): they need ``-G``, and
    the beats must come more often than the timeout - the client's own rule
    (:class:`ConsumerSettings`, with its default session of 2 beacon intervals), asked
    here rather than written out again. Each value's range is its option's type."""
    from dafka.client import ConsumerSettings

    given = {
        k: v
        for k, v in (
            ("session_timeout_ms", session_timeout_ms),
            ("heartbeat_interval_ms", heartbeat_interval_ms),
        )
        if v is not None
    }
    if given and group is None:
        raise click.UsageError(
            "--session-timeout and --heartbeat-interval are a group member's: give -G GROUP"
        )
    try:
        ConsumerSettings(
            beacon_interval=beacon_interval,
            session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms,
        )
    except ConfigError as exc:
        raise click.UsageError(f"--session-timeout/--heartbeat-interval: {exc}") from exc
    return given


default_group_wait = 10.0
"""Seconds ``status`` waits for a store's answer about the groups' commits."""

_SECONDS_LOOK_LIKE = 100_000_000_000
"""A ``--from-timestamp`` below it (1973-03-03 in ms) is most likely seconds (``date +%s``,
Unix time): it would read everything, silently."""

_wait_option = click.option(
    "--wait",
    type=click.FloatRange(0.1, 600),
    default=None,
    help="Seconds to listen at most (default: 6 beacon intervals, at least 6 s); it stops "
    "earlier once every store answered and nothing new was heard for a while.",
)


def _watch(
    topics: tuple[str, ...],
    towers: tuple[str, ...],
    advertise: str,
    bind_host: str,
    beacon_interval: float,
    security: KeyFiles,
    wait: float | None,
) -> dict[str, Any]:
    from dafka.cli._status import default_wait, report, towers_of, watch

    transport = transport_config(towers, advertise, bind_host, beacon_interval, security)
    snapshot = watch(topics, transport, wait or default_wait(beacon_interval))
    return report(snapshot, towers_of(transport), topics)


@main.command()
@click.argument("topics", nargs=-1, type=TopicType())
@node_options
@security_options
@json_option("object")
@_wait_option
def status(
    topics: tuple[str, ...],
    towers: tuple[str, ...],
    advertise: str,
    bind_host: str,
    beacon_interval: float,
    security: KeyFiles,
    as_json: bool,
    wait: float | None,
) -> None:
    """Show the stores, topics (or only TOPICS), heads per store, lag, producers, consumers,
    and the consumer groups' committed offsets and lag.

    All of it as the cluster announces it (beacons, HEADs, subscriptions): it joins as a
    watcher, listens until nothing new is heard, and prints what it learnt.
    """
    import json

    from dafka.cli._groups import group_lines, status_groups
    from dafka.cli._status import status_lines
    from dafka.client import ConsumerSettings

    found = _watch(topics, towers, advertise, bind_host, beacon_interval, security, wait)
    settings = ConsumerSettings(
        **client_fields(towers, advertise, bind_host, beacon_interval, security)
    )
    found["groups"] = status_groups(settings, found, wait or default_group_wait)
    if as_json:
        click.echo(json.dumps(found, indent=2))
    else:
        click.echo("\n".join([*status_lines(found), *group_lines(found["groups"])]))


@main.group(invoke_without_command=True)
@node_options
@security_options
@json_option("array")
@_wait_option
@click.pass_context
def topics(
    ctx: click.Context,
    towers: tuple[str, ...],
    advertise: str,
    bind_host: str,
    beacon_interval: float,
    security: KeyFiles,
    as_json: bool,
    wait: float | None,
) -> None:
    """List the topics the cluster announces: partitions, records, producers, lag
    (``dafka topics describe T``, ``dafka topics delete T --yes``: one topic)."""
    if ctx.invoked_subcommand is not None:
        return
    import json

    from dafka.cli._status import topics_lines, topics_rows

    rows = topics_rows(_watch((), towers, advertise, bind_host, beacon_interval, security, wait))
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    else:
        click.echo("\n".join(topics_lines(rows)))


@topics.command("describe")
@click.argument("topic", type=TopicType())
@node_options
@security_options
@json_option("object")
@_wait_option
def topics_describe(
    topic: str,
    towers: tuple[str, ...],
    advertise: str,
    bind_host: str,
    beacon_interval: float,
    security: KeyFiles,
    as_json: bool,
    wait: float | None,
) -> None:
    """One topic: each partition's head, the head each store holds, its producer, the lag.
    Exit 1 if no store or producer knows it."""
    import json

    from dafka.cli._status import describe_lines
    from dafka.client import Admin

    fields = client_fields(towers, advertise, bind_host, beacon_interval, security)
    info = Admin(**fields).describe(topic, wait)
    if not info.partitions and not info.producers:
        raise click.ClickException(f"no store or producer knows topic {topic!r}")
    partitions: list[dict[str, Any]] = [
        {
            "partition": p.partition,
            "head": p.head,
            "producer_head": p.producer_head,
            "stores": dict(p.stores),
            "lag": p.lag,
        }
        for p in info.partitions.values()
    ]
    if as_json:
        found = {
            "topic": topic,
            "records": info.records,
            "producers": list(info.producers),
            "consumed": info.consumed,
            "partitions": partitions,
        }
        click.echo(json.dumps(found, indent=2))
        return
    click.echo(
        f"topic {topic}: {len(partitions)} partition(s), {info.records} record(s), "
        f"{len(info.producers)} live producer(s), consumed: {'yes' if info.consumed else 'no'}"
    )
    click.echo("\n".join(describe_lines(partitions)))


@topics.command("delete")
@click.argument("topic", type=TopicType())
@node_options
@security_options
@click.option("--yes", is_flag=True, help="Confirm: the topic's records are deleted for good.")
@click.option(
    "--timeout",
    type=click.FloatRange(0.1, 3600),
    default=30.0,
    show_default=True,
    help="Seconds to wait for every live store to apply the delete.",
)
def topics_delete(
    topic: str,
    towers: tuple[str, ...],
    advertise: str,
    bind_host: str,
    beacon_interval: float,
    security: KeyFiles,
    yes: bool,
    timeout: float,
) -> None:
    """Delete TOPIC's records on every store, up to each partition's head now (a tombstone
    every store applies; records written after it are kept; a store that is down applies
    it when it comes back; docs/storage.md). Needs --yes."""
    from dafka.client import Admin

    if not yes:
        raise UserError(f"deleting {topic!r} removes its records for good: pass --yes")
    fields = client_fields(towers, advertise, bind_host, beacon_interval, security)
    cuts = Admin(**fields).delete_topic(topic, timeout)
    if not cuts:
        raise click.ClickException(f"no store or producer knows topic {topic!r}: nothing deleted")
    records = sum(c + 1 for c in cuts.values())
    click.echo(
        f"deleted {topic}: {len(cuts)} partition(s), up to {records} record(s) "
        "(every live store applied it)"
    )


@main.command()
@click.argument("group", required=False)
@node_options
@security_options
@json_option("array")
@click.option(
    "--timeout",
    type=click.FloatRange(0.5, 600),
    default=10.0,
    show_default=True,
    help="Seconds to wait for a store's answers.",
)
def groups(
    group: str | None,
    towers: tuple[str, ...],
    advertise: str,
    bind_host: str,
    beacon_interval: float,
    security: KeyFiles,
    as_json: bool,
    timeout: float,
) -> None:
    """Consumer groups (or only GROUP): committed offsets and lag per partition.

    Read from the stores (docs/groups.md): every group that committed offsets, each
    partition's committed offset, its head and the RECORDs between them.
    """
    import json

    from dafka.cli._groups import group_lines, groups_report
    from dafka.client import ConsumerSettings

    settings = ConsumerSettings(
        **client_fields(towers, advertise, bind_host, beacon_interval, security)
    )
    found = groups_report(settings, group, timeout)
    if group is not None and not found:
        raise click.ClickException(f"group {group!r}: no committed offsets, no live member")
    if as_json:
        click.echo(json.dumps(found, indent=2))
    else:
        click.echo("\n".join(group_lines(found)))


@main.command()
@click.argument("topics", nargs=-1, type=TopicType())
@node_options
@security_options
@click.option(
    "--interval",
    type=click.FloatRange(0.1, 3600),
    default=1.0,
    show_default=True,
    help="Seconds between frames.",
)
@click.option("--iterations", type=click.IntRange(min=1), default=None, help="Stop after N frames.")
@click.option("--once", is_flag=True, help="One frame (same as --iterations 1).")
def top(
    topics: tuple[str, ...],
    towers: tuple[str, ...],
    advertise: str,
    bind_host: str,
    beacon_interval: float,
    security: KeyFiles,
    interval: float,
    iterations: int | None,
    once: bool,
) -> None:
    """A live view of topics, partitions, heads, rates and stores (Ctrl-C quits)."""
    from dafka.cli._top import top as run
    from dafka.client import ConsumerSettings

    transport = transport_config(towers, advertise, bind_host, beacon_interval, security)
    settings = ConsumerSettings(
        **client_fields(towers, advertise, bind_host, beacon_interval, security)
    )
    try:
        run(topics, transport, interval, 1 if once else iterations, settings=settings)
    except KeyboardInterrupt:  # Ctrl-C is how one leaves top: not an error
        return


@main.command("config")
@json_option("object")
@click.pass_obj
def config_command(layers: Layers, as_json: bool) -> None:
    """Print every setting's effective value and where it came from (file, env, default).

    Flags are not shown: they apply to the command they are given to, and win over these.
    """
    import json

    from dafka.config import SETTINGS

    effective = layers.effective()
    if as_json:
        table = {
            key: {
                "value": None if v.value is None else str(v.value),
                "source": v.source,
                "env": SETTINGS[key].env,
                "flag": SETTINGS[key].flag,
            }
            for key, v in effective.items()
        }
        click.echo(json.dumps(table, indent=2))
        return
    width = max(len(k) for k in effective)
    for key, v in effective.items():
        shown = "(required)" if v.value is None else repr(v.value) if v.value == "" else v.value
        click.echo(f"{key:<{width}}  {shown!s:<24}  {v.source:<28}  {SETTINGS[key].env}")


_bench_options = stack(
    click.option("--records", default=200_000, show_default=True, type=click.IntRange(1)),
    click.option(
        "--size",
        default=100,
        show_default=True,
        type=click.IntRange(8, 16 * 1024 * 1024),
        help="Record size in bytes.",
    ),
    click.option(
        "--data",
        "data_dir",
        type=click.Path(path_type=Path, file_okay=False),
        default=None,
        help="Where the stores keep their logs (default: a temporary directory).",
    ),
)


@main.command()
@_bench_options
def bench(records: int, size: int, data_dir: Path | None) -> None:
    """Throughput of a local cluster: a producer, then a late consumer; prints figures."""
    from dafka.cli._demo import run_demo

    run_demo(records, size, data_dir)


@main.command(hidden=True)
@_bench_options
def demo(records: int, size: int, data_dir: Path | None) -> None:
    """The former name of `dafka bench`."""
    from dafka.cli._demo import run_demo

    run_demo(records, size, data_dir)


@main.command()
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
def keygen(path: Path) -> None:
    """Write a new CURVE keypair: PATH.key (public, to share) and PATH.key_secret (secret).

    The files are ZeroMQ certificates (zmq.auth's format). Give a node its secret with
    --key PATH.key_secret; copy PATH.key into the --authorized-keys directory of every node
    that must accept it (docs/security.md).
    """
    from dafka.transport.security import keygen as write

    public, secret = write(path)
    click.echo(f"public key: {public}\nsecret key: {secret} (keep it private: mode 600)")


def _add_pipeline() -> None:
    from dafka.pipeline import pipeline_command

    main.add_command(pipeline_command)


_add_pipeline()

__all__ = ["main"]
