"""How consume writes records: JSON lines, templates, --offset JSON; produce's splitting."""

from __future__ import annotations

import base64
import io
import json

import pytest

from dafka.cli._output import json_line, offsets, raw, template
from dafka.cli._produce import split, with_keys
from dafka.errors import ConfigError
from dafka.records import Record

REC = Record("t", "p1", 7, 2, b"k", b"v\xff", (("h", b"x"), ("b", b"\xfe")), 1700000000000)


def test_json_line_keeps_every_byte_and_text_stays_text() -> None:
    line = json_line(REC)
    assert line.endswith(b"\n")
    obj = json.loads(line)
    assert obj["topic"] == "t"
    assert obj["partition"] == "p1"
    assert (obj["offset"], obj["index"]) == (7, 2)
    assert obj["key"] == "k"
    assert "key_encoding" not in obj
    assert obj["value_encoding"] == "base64"
    assert base64.b64decode(obj["value"]) == b"v\xff"
    assert obj["headers"][0] == {"name": "h", "value": "x"}
    assert base64.b64decode(obj["headers"][1]["value"]) == b"\xfe"
    assert obj["timestamp"] == 1700000000000
    plain = json.loads(json_line(Record("t", "p", 0, 0, None, b"hi", (), None)))
    assert plain["key"] is None
    assert plain["value"] == "hi"
    assert plain["timestamp"] is None


def test_template_fields_and_escapes() -> None:
    fmt = template(r"%t|%p|%o|%i|%k|%K|%s|%S|%T|%h|%%\t\n")
    assert fmt(REC) == b"t|p1|7|2|k|1|v\xff|2|1700000000000|h=x,b=\xfe|%\t\n"
    assert template("%K %T")(Record("t", "p", 0, 0, None, b"", (), None)) == b"-1 -1"


@pytest.mark.parametrize("spec", ["%x", "abc %", r"\q", ""])
def test_bad_templates_are_config_errors(spec: str) -> None:
    with pytest.raises(ConfigError):
        template(spec)


def test_raw_appends_the_delimiter() -> None:
    assert raw(b"\0")(REC) == b"v\xff\0"


def test_offsets_json() -> None:
    assert offsets('{"p1": 5}', ("t",)) == {("t", "p1"): 5}
    assert offsets('{"a": {"x": 0}, "b": {"y": 3}}', ("a", "b")) == {("a", "x"): 0, ("b", "y"): 3}
    for bad in ("[1]", '{"p": -1}', '{"c": {"p": 1}}', '{"p": 1}', "nope"):
        with pytest.raises(ConfigError):
            offsets(bad, ("a", "b") if bad == '{"p": 1}' else ("a",))


def test_split_on_newline_nul_and_any_delimiter() -> None:
    assert list(split(io.BytesIO(b"a\nb\n\nc"), b"\n")) == [b"a", b"b", b"", b"c"]
    assert list(split(io.BytesIO(b"a\0b\0"), b"\0", chunk=1)) == [b"a", b"b"]
    assert list(split(io.BytesIO(b"a::b::c"), b"::", chunk=2)) == [b"a", b"b", b"c"]
    assert list(split(io.BytesIO(b""), b"\n")) == []


def test_keys_split_at_the_first_delimiter() -> None:
    pairs = list(with_keys([b"k1:v:1", b"novalue", b":v"], b":"))
    assert pairs == [(b"k1", b"v:1"), (None, b"novalue"), (b"", b"v")]
    assert list(with_keys([b"a:b"], None)) == [(None, b"a:b")]
