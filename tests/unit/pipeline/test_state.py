"""The runner's state, folded from children's reports: when the job has read everything."""

from __future__ import annotations

from dafka.pipeline._state import State, parse_watermark


def test_producers_done_and_heads() -> None:
    state = State("in")
    state.apply("producer-0", {"type": "progress", "sent": 5, "acked": 3, "behind": 0.1})
    assert [state.producers_done] == [False]  # (a list: mypy would narrow the property)
    assert (state.sent, state.acked) == (5, 3)
    state.apply("producer-0", {"type": "done", "sent": 9, "heads": {"p.0": 4, "p.1": 2}})
    state.apply("producer-1", {"type": "done", "sent": 1, "heads": {"q.0": 1}})
    assert state.producers_done
    assert state.heads() == {"p.0": 4, "p.1": 2, "q.0": 1}
    assert state.sent == state.acked == 10


def test_job_batches_offsets_watermark_and_lag() -> None:
    state = State("in")
    state.apply("job", {"type": "started", "queries": ["a"]})
    assert [state.job.running] == [True]
    state.apply(
        "job",
        {
            "type": "batch",
            "query": "a",
            "input": 7,
            "output": -1,
            "watermark": "2026-01-01T00:00:10.001Z",
            "end": {"in": {"p.0": 3, "p.1": 2}, "other": {"x": 9}},
            "dropped_by_watermark": 0,
            "duration_ms": 1_500,
        },
    )
    query = state.job.queries["a"]
    assert query.durations_ms == [1_500]
    assert (query.batches, query.rows_in, query.rows_out) == (1, 7, 0)
    assert query.end == {"p.0": 3, "p.1": 2}
    assert query.watermark_ms == 1_767_225_610_001
    state.apply("producer-0", {"type": "done", "sent": 6, "heads": {"p.0": 4, "p.1": 2}})
    assert not state.has_read("a", state.heads())
    assert state.lag("a") == 1
    state.apply("job", {"type": "batch", "query": "a", "input": 1, "end": {"in": {"p.0": 4}}})
    assert query.durations_ms == [1_500]  # a batch without a duration adds none
    assert state.has_read("a", {"p.0": 4})
    assert not state.has_read("b", {"p.0": 4})
    assert state.watermark_passed("a", 1_767_225_610_001)
    assert not state.watermark_passed("a", 1_767_225_610_002)
    state.apply("job", {"type": "exit", "code": 1})
    assert not state.job.running
    assert state.job.exit_code == 1


def test_watermark_parsing() -> None:
    assert parse_watermark(None) is None
    assert parse_watermark("1970-01-01T00:00:00.000Z") is None  # Spark's "not set yet"
    assert parse_watermark("2026-01-01T00:00:00.000Z") == 1_767_225_600_000


def test_a_query_of_the_output_topic_is_not_input_lag() -> None:
    """to-parquet reads the output topic (read committed: its offsets carry the producers'
    states): its end is that topic's, and it has no lag on the input."""
    state = State("in")
    state.apply(
        "job", {"type": "started", "queries": ["t", "p"], "sources": {"t": "in", "p": "out"}}
    )
    state.apply("producer-0", {"type": "done", "sent": 6, "heads": {"p.0": 4}})
    committed = {"offsets": {"out": {"s.0.0": 7}}, "producers": {"out": {"s.0.0": []}}}
    state.apply("job", {"type": "batch", "query": "p", "input": 3, "end": committed})
    state.apply("job", {"type": "batch", "query": "t", "input": 4, "end": {"in": {"p.0": 3}}})
    assert [state.reads_input("t"), state.reads_input("p")] == [True, False]
    assert state.job.queries["p"].end == {"s.0.0": 7}
    assert state.has_read("p", {"s.0.0": 7})
    assert not state.has_read("p", {"s.0.0": 8})
    assert (state.lag("t"), state.lag("p")) == (1, None)
