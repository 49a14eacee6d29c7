"""``dafka pipeline`` (and ``python -m dafka.pipeline``): run the pipeline, print its summary."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import click

from dafka.config import KeyFiles, check_towers
from dafka.config.options import security_options
from dafka.errors import ConfigError
from dafka.pipeline._run import Chaos, Interrupted, PipelineError, RunOptions
from dafka.pipeline._workload import WorkloadSpec
from dafka.transport.security import Security


def _checked_towers(value: str | None) -> str | None:
    """``--towers`` checked by the one tower grammar (as every client and command), so a
    bad value is a usage error here rather than a failure deep inside the run."""
    if value is not None:
        try:
            check_towers(value, "--towers")
        except ConfigError as exc:
            raise click.BadParameter(str(exc).removeprefix("--towers: ")) from None
    return value


@click.command("pipeline")
@click.option(
    "--data",
    "data_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("pipeline-data"),
    show_default=True,
    help="Where the local cluster, the Spark checkpoints, the Parquet output and logs go.",
)
@click.option(
    "--towers",
    default=None,
    callback=lambda _ctx, _param, value: _checked_towers(value),
    help="Use an existing dafka cluster (tower host:port,...) instead of starting one.",
)
@click.option(
    "--spark-master",
    default="local[2]",
    show_default=True,
    help="Spark master URL (local[N], spark://host:7077...). Every executor's Python "
    "needs dafka[spark] installed.",
)
@click.option("--readings", default=18_000, show_default=True, help="Readings in the feed.")
@click.option("--devices", default=40, show_default=True, help="Devices sending readings.")
@click.option(
    "--step",
    "step_ms",
    default=3,
    show_default=True,
    help="Event time between consecutive readings (ms): at 3, 18,000 readings span 54 s of "
    "event time, and the watermark closes windows while they are produced.",
)
@click.option(
    "--rate",
    default=300.0,
    show_default=True,
    help="Messages per second, all producers together (0: as fast as possible).",
)
@click.option("--producers", default=2, show_default=True, help="Producer processes.")
@click.option("--seed", default=7, show_default=True, help="The feed's random seed.")
@click.option("--window", "window_s", default=5.0, show_default=True, help="Window (s).")
@click.option(
    "--watermark", "watermark_s", default=20.0, show_default=True, help="Watermark delay (s)."
)
@click.option(
    "--forever",
    is_flag=True,
    help="Produce until Ctrl-C (the feed repeats with new seeds), then drain and check.",
)
@click.option(
    "--sink",
    type=click.Choice(["dafka", "driver"]),
    default="dafka",
    show_default=True,
    help="How the job writes to topics: the connector's exactly-once sink, or an "
    "at-least-once producer on the driver (foreachBatch).",
)
@click.option(
    "--chaos",
    is_flag=True,
    help="Kill the Spark job (restarted from its checkpoints) and a store while it runs.",
)
@security_options
def pipeline_command(
    data_dir: Path,
    towers: str | None,
    spark_master: str,
    readings: int,
    devices: int,
    step_ms: int,
    rate: float,
    producers: int,
    seed: int,
    window_s: float,
    watermark_s: float,
    forever: bool,
    sink: str,
    chaos: bool,
    security: KeyFiles,
) -> None:
    """The main job: a streaming pipeline on dafka and Spark that checks its own output.

    Sensor readings (late, duplicated and malformed ones among them) are produced into a
    dafka topic; a Spark Structured Streaming job parses them (bad ones to a dead-letter
    topic), deduplicates, aggregates per device and 5 s event-time window with a watermark,
    enriches from a reference table, and writes the aggregates exactly-once to an output
    topic and to Parquet. The summary compares both with the output computed in plain
    Python; the command fails if they differ.

    With --key (and --authorized-keys, --tower-key, --acl) everything runs secured: the
    local cluster, the producers, the checks and the Spark job (docs/security.md).
    """
    missing = [m for m in ("pyspark", "pyarrow", "rich") if importlib.util.find_spec(m) is None]
    if missing:
        raise click.ClickException(
            f"the pipeline needs {', '.join(missing)}: pip install 'dafka[pipeline]'"
        )
    if spark_master.startswith("local") and shutil.which("java") is None:
        raise click.ClickException("Spark needs Java 17 on PATH (no 'java' found)")
    from rich.console import Console

    from dafka.pipeline._display import live_display, print_summary
    from dafka.pipeline._run import Runner

    if producers < 1 or readings < 1 or devices < 1 or step_ms < 1 or rate < 0:
        raise click.UsageError(
            "--producers, --readings, --devices and --step must be >= 1, --rate >= 0"
        )
    if window_s <= 0 or watermark_s < 0:
        raise click.UsageError("--window must be > 0 and --watermark >= 0")
    try:
        Security.from_files(security)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    window_ms = round(window_s * 1000)
    watermark_ms = round(watermark_s * 1000)
    spec = WorkloadSpec(seed=seed, readings=readings, devices=devices, step_ms=step_ms)
    if spec.max_lateness_ms + spec.max_duplicate_delay * 2 * spec.step_ms >= watermark_ms:
        raise click.UsageError(
            f"--watermark must exceed the feed's lateness ({spec.max_lateness_ms} ms + "
            "duplicate delay), or late readings would be dropped"
        )
    options = RunOptions(
        data_dir=data_dir.resolve(),
        spec=spec,
        towers=towers,
        spark_master=spark_master,
        producers=producers,
        rate=rate,
        window_ms=window_ms,
        watermark_ms=watermark_ms,
        forever=forever,
        sink=sink,
        chaos=Chaos(kill_job_after_batches=4, kill_store_at=0.5) if chaos else Chaos(),
        security=security,
    )
    console = Console()
    console.print(
        f"dafka pipeline {options.run_id}: {readings:,} readings from {devices} devices, "
        f"{producers} producers at {rate:,.0f} msg/s; Spark {spark_master}; data in {data_dir}",
        highlight=False,
    )
    try:
        with live_display(console) as display:
            summary = Runner(options, display).run()
    except PipelineError as exc:
        console.print(f"pipeline failed: {exc}", style="bold red", highlight=False)
        console.print(f"logs: {options.data_dir / 'logs'}", highlight=False)
        sys.exit(1)
    except Interrupted as exc:
        console.print(f"interrupted while {exc.phase}: stopped without checks", style="bold red")
        sys.exit(130)
    except KeyboardInterrupt:  # outside the run (its SIGINT handler restored): as above
        console.print("interrupted: stopped without checks", style="bold red")
        sys.exit(130)
    print_summary(console, summary)
    console.print(
        f"outputs: topic {options.output_topic}, dead letters {options.dead_letter_topic}, "
        f"Parquet {options.parquet_dir}",
        highlight=False,
    )
    if not summary.ok:
        sys.exit(1)


__all__ = ["pipeline_command"]
