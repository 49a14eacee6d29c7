"""The summary says whether the job kept up with the feed, and fails when it did not."""

from __future__ import annotations

from pathlib import Path

from dafka.pipeline._checks import KEPT_UP_SECONDS, kept_up
from dafka.pipeline._run import RunOptions, Timings


def timings(lags: list[int], at_end: int) -> Timings:
    """A feed of 60 s from t=100, the lag sampled every second."""
    t = Timings(started=100.0, producing_done=160.0, lag_at_end=at_end)
    t.lag = [(float(i), lag) for i, lag in enumerate(lags)]
    return t


def test_a_job_whose_lag_stays_small_kept_up() -> None:
    options = RunOptions(data_dir=Path("unused"), rate=1_000.0)
    check, figure = kept_up(options, timings([500, 3_000, 800, 600] * 15, 700), 60_000)
    assert check is not None
    assert check.ok, check
    assert "max 3,000 offsets at 1 s" in figure
    assert "700 when the producers were done" in figure
    assert "read 988 events/s while they sent 1,000" in figure


def test_a_job_that_fell_behind_fails_and_says_what_it_sustained() -> None:
    options = RunOptions(data_dir=Path("unused"), rate=1_000.0)
    growing = [i * 400 for i in range(60)]  # reads 600 of every 1,000 events
    check, _ = kept_up(options, timings(growing, 24_000), 60_000)
    assert check is not None
    assert not check.ok
    assert check.name == "job kept up"
    assert f"{KEPT_UP_SECONDS:.0f} s at 1,000 msg/s" in check.detail
    assert "sustained 600 events/s" in check.detail


def test_an_unpaced_feed_has_a_figure_but_no_check() -> None:
    options = RunOptions(data_dir=Path("unused"), rate=0.0)
    check, figure = kept_up(options, timings([10, 20], 0), 1_000)
    assert check is None
    assert "read 17 events/s" in figure


def test_a_run_that_never_finished_producing_has_neither() -> None:
    options = RunOptions(data_dir=Path("unused"), rate=1_000.0)
    assert kept_up(options, Timings(started=0.0), 0) == (None, "n/a")


def test_a_restarted_job_is_not_held_to_it() -> None:
    options = RunOptions(data_dir=Path("unused"), rate=1_000.0)
    check, figure = kept_up(options, timings([0, 30_000], 30_000), 60_000, disrupted=True)
    assert check is None
    assert "not checked: the job was restarted" in figure


def test_a_feed_stopped_before_its_first_sample_has_a_figure() -> None:
    """Ctrl-C as the feed began: no lag sample, nothing sent (an IndexError before)."""
    options = RunOptions(data_dir=Path("unused"), rate=300.0)
    t = Timings(started=100.0, producing_done=100.5, lag_at_end=0)
    check, figure = kept_up(options, t, 0)
    assert check is not None
    assert check.ok
    assert figure.startswith("not sampled (the feed stopped within its first second); 0 when")
