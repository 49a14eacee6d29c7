"""``dafka groups``: a member's pending members - heard, not yet counted alive - are shown
(issue 20: before, nothing showed them)."""

from __future__ import annotations

from dafka.cli._groups import group_lines, group_rows
from dafka.protocol import MemberBeat


def test_a_members_pending_members_are_listed_by_key() -> None:
    # m1 counts s (static: instance "web-1", member id m2) alive; it heard m3 but m3 has
    # not acknowledged it yet; m3 heard nobody's acknowledgment either
    m1 = MemberBeat(
        "g", "m1", 5, "", ("t",), ("m1", "web-1"), (("t", "p0"),), acks=(("m2", 3), ("m3", 1))
    )
    m2 = MemberBeat(
        "g", "m2", 4, "web-1", ("t",), ("m1", "web-1"), (("t", "p1"),), acks=(("m1", 4),)
    )
    m3 = MemberBeat("g", "m3", 1, "", ("t",), ("m3",), (), acks=(("m1", 4),))
    rows = group_rows({}, {}, {"g": [m1, m2, m3]})
    members = {m["member"]: m for m in rows[0]["members"]}
    assert members["m1"]["pending"] == ["m3"]
    assert members["m2"]["pending"] == []
    assert members["m3"]["pending"] == ["m1"]
    lines = group_lines(rows)
    assert "  member m1: t/p0 (pending: m3)" in lines
    assert "  member m2 (web-1): t/p1" in lines
    assert "  member m3: - (pending: m1)" in lines
