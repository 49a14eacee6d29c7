"""The job's logic as Spark DataFrame operations, apart from where data comes from and goes.

``transform(raw, devices)`` takes any stream (or batch) with a binary ``value`` column - the
dafka source's rows, or files in a test - and returns the two outputs: the dead letters (the
input rows that do not parse, unchanged) and the enriched window aggregates. The rules are the
ones :mod:`dafka.pipeline._expected` states in plain Python; keep the two in step.

This module and :mod:`._job` are the only ones of the pipeline that import pyspark (an
application on top of :mod:`dafka.spark`, installed with the ``spark`` extra).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812  (the PySpark idiom)

MESSAGE_SCHEMA = "event_id STRING, device STRING, ts BIGINT, temp INT, heartbeat BOOLEAN"
"""What a message may hold. Spark's JSON reader sets a field it cannot read as its type to
null (a string where ``temp`` belongs, a truncated object...), which the rules below reject."""

AGGREGATE_COLUMNS = (
    "window_start",
    "window_end",
    "device",
    "site",
    "kind",
    "count",
    "temp_sum",
    "temp_min",
    "temp_max",
)
"""The output rows' columns, in order (as :class:`dafka.pipeline.Aggregate`'s fields)."""

AGGREGATE_SCHEMA = (
    "window_start BIGINT, window_end BIGINT, device STRING, site STRING, kind STRING, "
    "count BIGINT, temp_sum BIGINT, temp_min INT, temp_max INT"
)
"""The output rows' columns and their types, as :func:`transform` makes them (the Parquet
copy, read back from the output topic by :func:`from_message`, has the same)."""


@dataclass(frozen=True)
class TransformSettings:
    """Event-time settings of the job (durations in ms)."""

    window_ms: int = 5_000
    watermark_ms: int = 20_000


@dataclass(frozen=True)
class Outputs:
    dead_letters: DataFrame  # the unparseable input rows, all columns as they came
    aggregates: DataFrame  # AGGREGATE_COLUMNS


def classify(raw: DataFrame) -> DataFrame:
    """``raw`` with ``e`` (the parsed struct) and ``outcome``: reading, heartbeat or dead."""
    e = F.from_json(F.col("value").cast("string"), MESSAGE_SCHEMA, {"mode": "PERMISSIVE"})
    parsed = raw.withColumn("e", e)
    is_heartbeat = F.coalesce(F.col("e.heartbeat"), F.lit(False))
    is_reading = (
        F.col("e.event_id").isNotNull()
        & F.col("e.device").isNotNull()
        & F.col("e.ts").isNotNull()
        & F.col("e.temp").isNotNull()
    )
    outcome: Column = (
        F.when(F.col("e").isNull(), F.lit("dead"))
        .when(is_heartbeat, F.when(F.col("e.ts").isNotNull(), "heartbeat").otherwise("dead"))
        .when(is_reading, F.lit("reading"))
        .otherwise(F.lit("dead"))
    )
    return parsed.withColumn("outcome", outcome)


def transform(raw: DataFrame, devices: DataFrame, settings: TransformSettings) -> Outputs:
    """Parse, split off dead letters, aggregate each window's distinct readings, enrich.

    One stateful operator: the window aggregation keeps each window's readings as a set
    (``collect_set`` of ``(event_id, temp)``) and computes count, sum, min and max over one
    reading per ``event_id`` when it emits the window. A duplicate is a reading sent again -
    the same event, hence the same device and event time, so the same window - so this is
    the deduplication by ``event_id`` (:mod:`._expected`). Until issue 21 it was a second
    stateful operator (``dropDuplicatesWithinWatermark``) before the aggregation: one more
    shuffle, state store and Spark stage in every micro-batch.

    ``devices`` is small (a reference table): it is read once, here, into a map in the plan,
    so that a micro-batch runs no job to read and broadcast it (a broadcast join scanned the
    file and broadcast it again in every micro-batch, cached or not)."""
    classified = classify(raw)
    dead = classified.where(F.col("outcome") == "dead").drop("e", "outcome")
    events = classified.where(F.col("outcome") != "dead").select(
        F.col("e.event_id").alias("event_id"),
        F.col("e.device").alias("device"),
        F.timestamp_millis(F.col("e.ts")).alias("event_time"),
        F.col("e.temp").alias("temp"),
        (F.col("outcome") == "heartbeat").alias("heartbeat"),
    )
    delay = f"{settings.watermark_ms} milliseconds"
    watermarked = events.withWatermark("event_time", delay)
    # Heartbeats must reach the watermark operator (they move event time) and no further.
    # The predicate names event_time on purpose: Spark pushes a filter below the watermark
    # unless it references the event-time column, and a heartbeat always has one.
    readings = watermarked.where(~F.col("heartbeat") | F.col("event_time").isNull())
    window = f"{settings.window_ms} milliseconds"
    aggregated = readings.groupBy(F.window("event_time", window).alias("w"), "device").agg(
        F.collect_set(F.struct("event_id", "temp")).alias("seen")
    )
    # one reading per event_id: sorted by (event_id, temp), an entry whose predecessor has
    # the same event_id is a duplicate (the same event sent again with another temperature)
    ordered = F.sort_array("seen")
    distinct = F.transform(
        F.filter(
            ordered,
            lambda r, i: F.when(i == 0, F.lit(True)).otherwise(
                r["event_id"] != F.element_at(ordered, i)["event_id"]  # 1-based: the one before
            ),
        ),
        lambda r: r["temp"],
    )
    sites, kinds = _lookups(devices)
    enriched = aggregated.select(
        F.unix_millis(F.col("w.start")).alias("window_start"),
        F.unix_millis(F.col("w.end")).alias("window_end"),
        "device",
        sites[F.col("device")].alias("site"),
        kinds[F.col("device")].alias("kind"),
        F.size(distinct).cast("bigint").alias("count"),
        F.aggregate(distinct, F.lit(0).cast("bigint"), lambda acc, t: acc + t).alias("temp_sum"),
        F.array_min(distinct).alias("temp_min"),
        F.array_max(distinct).alias("temp_max"),
    )
    return Outputs(dead, enriched)


def _lookups(devices: DataFrame) -> tuple[Column, Column]:
    """The reference table as two map literals, device -> site and device -> kind."""
    table = {r["device"]: r for r in devices.select("device", "site", "kind").collect()}
    table.pop(None, None)

    def lookup(field: str) -> Column:
        entries = (F.lit(x) for d, r in table.items() for x in (d, r[field]))
        return F.create_map(*entries).cast("map<string,string>")

    return lookup("site"), lookup("kind")


def to_message(aggregates: DataFrame) -> DataFrame:
    """Aggregates as the dafka sink takes them: ``key`` the device, ``value`` the row as JSON."""
    return aggregates.select(
        F.col("device").cast("binary").alias("key"),
        F.to_json(F.struct(*AGGREGATE_COLUMNS)).cast("binary").alias("value"),
    )


def from_message(messages: DataFrame) -> DataFrame:
    """The aggregates back from the output topic's messages (:func:`to_message`'s inverse):
    the Parquet copy is fed from the topic, so that the input is parsed, deduplicated and
    aggregated once (a JSON field that :func:`to_message` left out, a null, is null)."""
    row = F.from_json(F.col("value").cast("string"), AGGREGATE_SCHEMA)
    return messages.select(row.alias("a")).select(*(f"a.{c}" for c in AGGREGATE_COLUMNS))


__all__ = [
    "AGGREGATE_COLUMNS",
    "AGGREGATE_SCHEMA",
    "MESSAGE_SCHEMA",
    "Outputs",
    "TransformSettings",
    "classify",
    "from_message",
    "to_message",
    "transform",
]
