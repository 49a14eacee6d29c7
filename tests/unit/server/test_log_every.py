"""The one rule of the store's rate-limited WARNING lines (``dafka.server._log_every``): a
line at most every ``interval`` seconds, covering everything counted since the last one."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from dafka.server._log_every import LogEvery


def test_the_first_growth_is_due_at_once_and_the_next_after_the_interval() -> None:
    every = LogEvery(5.0)
    assert every.take(0, 0.0) == 0  # nothing counted: no line
    assert every.take(3, 0.0) == 3
    assert every.take(4, 1.0) == 0  # within the interval: counted, not said
    assert every.take(6, 4.9) == 0
    assert every.take(6, 5.0) == 3  # the line covers all three since the last one
    assert every.take(6, 20.0) == 0  # nothing new: no line, however late
    assert every.take(7, 20.0) == 1  # a quiet spell: the next growth is said at once


@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.floats(0.0, 10.0, allow_nan=False)),
        max_size=60,
    )
)
def test_the_lines_add_up_to_the_count_and_keep_the_interval(
    steps: list[tuple[int, float]],
) -> None:
    """Whatever the growth and the gaps: no two lines closer than the interval, each line
    says only what grew, and a last take after the interval says the rest."""
    every = LogEvery(5.0)
    count, now, said = 0, 0.0, 0
    lines: list[float] = []
    for grow, gap in steps:
        count += grow
        now += gap
        grown = every.take(count, now)
        if grown:
            lines.append(now)
            said += grown
        assert said <= count
    said += every.take(count, now + 5.0)
    assert said == count
    assert all(b >= a + 5.0 for a, b in itertools.pairwise(lines))
