"""The one loader convention: ``load_records`` -> ``LoadResult(records, errors)``."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, ValidationError

from langchain_references.errors import RecordError
from langchain_references.services.loading import (
    MAX_DEPTH,
    iter_json_objects,
    load_records,
    validation_error,
)


def keep(obj: Any, *, location: str | None = None) -> tuple[str | None, Any]:
    if not isinstance(obj, dict):
        raise RecordError("record is not a JSON object", location)
    return location, obj


def nested(depth: int) -> str:
    """A JSON array ``depth`` levels deep."""
    return "[" * depth + "]" * depth


# ------------------------------------------------------------------ deep nesting (problem 8)


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 100_000])
def test_deep_jsonl_line_is_a_record_error(tmp_path: Path, depth: int) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(f'{{"a": 1}}\n{{"deep": {nested(depth)}}}\n{{"b": 2}}\n', encoding="utf-8")
    loaded = load_records(path, keep, strict=False)
    assert [r for _, r in loaded.records] == [{"a": 1}, {"b": 2}]
    (error,) = loaded.errors
    assert error.location == f"{path}:2"
    assert f"nested deeper than {MAX_DEPTH} levels" in str(error)
    with pytest.raises(RecordError, match="nested deeper"):
        load_records(path, keep)


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 100_000])
def test_deep_list_element_is_a_record_error(tmp_path: Path, depth: int) -> None:
    path = tmp_path / "in.json"
    path.write_text(f'[\n  {{"a": 1}},\n  {{"deep": {nested(depth)}}},\n  {{"b": 2}}\n]\n')
    loaded = load_records(path, keep, strict=False)
    assert [r for _, r in loaded.records] == [{"a": 1}, {"b": 2}]
    assert [r[0] for r in loaded.records] == [f"{path}:2", f"{path}:4"]
    assert [e.location for e in loaded.errors] == [f"{path}:3"]


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 100_000])
def test_deep_single_document_is_a_record_error(tmp_path: Path, depth: int) -> None:
    path = tmp_path / "in.json"
    path.write_text(f'{{\n  "deep": {nested(depth)}\n}}\n')
    with pytest.raises(RecordError, match="nested deeper") as info:
        load_records(path, keep, strict=False)
    assert info.value.location == f"{path}:1"


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(depth=st.integers(min_value=1, max_value=3 * MAX_DEPTH))
def test_depth_bound(tmp_path: Path, depth: int) -> None:
    """A record is accepted exactly when it nests at most MAX_DEPTH levels (itself included)."""
    path = tmp_path / "in.jsonl"
    inner = nested(depth - 1) if depth > 1 else "0"
    path.write_text(f'{{"x": 0}}\n{{"v": {inner}}}\n', encoding="utf-8")
    loaded = load_records(path, keep, strict=False)
    assert len(loaded.records) == (2 if depth <= MAX_DEPTH else 1)
    assert len(loaded.errors) == (0 if depth <= MAX_DEPTH else 1)


# ------------------------------------------------------------------ locations


LINE = st.one_of(
    st.dictionaries(st.text(max_size=4), st.integers() | st.text(max_size=4), max_size=3).map(
        lambda d: ("ok", json.dumps(d))
    ),
    st.sampled_from(["{broken", '{"a": }', "nope", '"a" "b"']).map(lambda s: ("bad", s)),
    st.just(("blank", "   ")),
)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(LINE, min_size=2, max_size=8))
def test_jsonl_locations_are_line_numbers(tmp_path: Path, lines: list[tuple[str, str]]) -> None:
    """Every record and every bad line is reported once, at its own line, in file order."""
    if not any(kind == "ok" for kind, _ in lines) or sum(k != "blank" for k, _ in lines) < 2:
        return  # not a JSONL file (a single value, or no object at all)
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(text for _, text in lines) + "\n", encoding="utf-8")
    loaded = load_records(path, keep, strict=False)
    expected_ok = [f"{path}:{i}" for i, (kind, _) in enumerate(lines, 1) if kind == "ok"]
    expected_bad = [f"{path}:{i}" for i, (kind, _) in enumerate(lines, 1) if kind == "bad"]
    assert [loc for loc, _ in loaded.records] == expected_ok
    assert [e.location for e in loaded.errors] == expected_bad
    assert [r for _, r in loaded.records] == [
        json.loads(text) for kind, text in lines if kind == "ok"
    ]


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    records=st.lists(st.dictionaries(st.text(max_size=3), st.integers(), max_size=3), max_size=6),
    indent=st.sampled_from([None, 1, 2]),
)
def test_list_elements_carry_their_line(
    tmp_path: Path, records: list[dict[str, int]], indent: int | None
) -> None:
    path = tmp_path / "in.json"
    text = json.dumps(records, indent=indent)
    path.write_text(text, encoding="utf-8")
    located = list(iter_json_objects(path))
    assert [value for _, value in located] == records
    if indent is None:
        assert all(loc == f"{path}:1" for loc, _ in located)
    else:  # each element starts on its own line, after the "[" line
        lines = text.splitlines()
        for loc, _ in located:
            line = int(loc.rsplit(":", 1)[1])
            assert lines[line - 1].strip().startswith("{")
        assert len({loc for loc, _ in located}) == len(records)


def test_single_object_and_malformed_file_locations(tmp_path: Path) -> None:
    path = tmp_path / "one.json"
    path.write_text('\n\n{\n  "a": 1\n}\n')
    assert list(iter_json_objects(path)) == [(f"{path}:3", {"a": 1})]
    broken = tmp_path / "broken.json"
    broken.write_text('{\n  "a": 1,\n  "b": \n}\n')
    with pytest.raises(RecordError, match="invalid JSON") as info:
        list(iter_json_objects(broken))
    assert info.value.location == f"{broken}:4"
    bad_list = tmp_path / "bad.json"
    bad_list.write_text('[\n  {"a": 1}\n  {"b": 2}\n]')
    with pytest.raises(RecordError, match="expecting ',' or ']'") as info:
        list(iter_json_objects(bad_list))
    assert info.value.location == f"{bad_list}:3"


def test_lenient_errors_are_not_also_logged_as_warnings(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The caller reports ``LoadResult.errors``; a WARNING log too made each one appear twice."""
    path = tmp_path / "in.jsonl"
    path.write_text('{"a": 1}\n{oops\n5\n', encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        loaded = load_records(path, keep, strict=False)
    assert len(loaded.errors) == 2
    assert caplog.records == []


# ------------------------------------------------------------------ validation errors


class Item(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    items: list[Item]
    title: str


@pytest.mark.parametrize(
    ("obj", "field", "message"),
    [
        ({"items": []}, "title", "title: required field is missing"),
        ({"items": [], "title": 1}, "title", "title: must be a string"),
        ({"items": {}, "title": "t"}, "items", "items: must be a list"),
        ({"items": [{"name": "a"}, 3], "title": "t"}, "items[1]", "items[1]: must be a JSON"),
        (
            {"items": [{"name": "a"}, {"nmae": "b"}], "title": "t"},
            "items[1].nmae",
            "items[1].nmae: unknown field (did you mean 'name'?); items[1].name: required",
        ),
        ({"items": [], "title": "t", "zzz": 1}, "zzz", "zzz: unknown field"),
    ],
)
def test_validation_error(obj: Any, field: str, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        Record.model_validate(obj)
    error = validation_error(info.value, "f.jsonl:9", error=RecordError, models=(Record, Item))
    assert type(error) is RecordError
    assert error.field == field
    assert error.location == "f.jsonl:9"
    assert str(error).startswith(f"f.jsonl:9: {message}")
    assert "did you mean" not in str(error) or "nmae" in str(error)


def test_validation_error_lists_at_most_three_problems() -> None:
    with pytest.raises(ValidationError) as info:
        Record.model_validate({"items": [1, 2, 3, 4], "title": 5})
    error = validation_error(info.value, None, error=RecordError)
    assert str(error).endswith("; and 2 more")
    assert error.location is None


# ------------------------------------------------------- bytes that are not UTF-8, surrogates


def test_a_jsonl_line_that_is_not_utf8_is_one_bad_record(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": "caf\xe9"}\n{"a": 3}\r\n\n{"a": "\xff\xfe"}\n')
    loaded = load_records(path, keep, strict=False)
    assert loaded.records == [(f"{path}:1", {"a": 1}), (f"{path}:3", {"a": 3})]
    assert [(e.location, e.message) for e in loaded.errors] == [
        (f"{path}:2", "not UTF-8: byte 0xE9 at column 11"),
        (f"{path}:5", "not UTF-8: byte 0xFF at column 8"),
    ]
    with pytest.raises(RecordError, match="not UTF-8: byte 0xE9") as info:
        load_records(path, keep)
    assert info.value.location == f"{path}:2"


def test_a_list_element_that_is_not_utf8_is_one_bad_record(tmp_path: Path) -> None:
    path = tmp_path / "in.json"
    path.write_bytes(b'[\n  {"a": 1},\n  {\n    "a": "\x80"\n  },\n  {"a": 3}\n]\n')
    loaded = load_records(path, keep, strict=False)
    assert loaded.records == [(f"{path}:2", {"a": 1}), (f"{path}:6", {"a": 3})]
    assert [(e.location, e.message) for e in loaded.errors] == [
        (f"{path}:4", "not UTF-8: byte 0x80 at column 11")
    ]


def test_a_single_document_that_is_not_utf8_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "one.json"
    path.write_bytes(b'{\n  "a": 1,\n  "b": "\xc3("\n}\n')
    with pytest.raises(RecordError, match="not UTF-8: byte 0xC3 at column 9") as info:
        list(iter_json_objects(path))
    assert info.value.location == f"{path}:3"


def test_a_lone_surrogate_is_a_bad_record_naming_its_field(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(
        '{"a": "ok \\ud83d\\ude00"}\n'
        '{"a": {"b": ["x", "bad \\ud800 y"]}}\n'
        '{"\\udfff": 1}\n'
        '{"a": 4}\n',
        encoding="utf-8",
    )
    loaded = load_records(path, keep, strict=False)
    assert loaded.records == [(f"{path}:1", {"a": "ok 😀"}), (f"{path}:4", {"a": 4})]
    assert [(e.location, e.field, e.message) for e in loaded.errors] == [
        (
            f"{path}:2",
            "a.b[1]",
            "a.b[1]: holds a lone surrogate (U+D800) at character 4",
        ),
        (
            f"{path}:3",
            "'\\udfff'",
            "'\\udfff': holds a lone surrogate (U+DFFF) at character 0",
        ),
    ]
    single = tmp_path / "one.json"
    single.write_text('[{"a": "\\udc00"}]', encoding="utf-8")
    (error,) = load_records(single, keep, strict=False).errors
    assert (error.location, error.field) == (f"{single}:1", "a")


def test_a_raw_line_separator_inside_a_jsonl_string_is_not_a_line_break(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text('{"a": "x\u2028y"}\n{"a": 2}\n', encoding="utf-8")
    assert load_records(path, keep).records == [
        (f"{path}:1", {"a": "x\u2028y"}),
        (f"{path}:2", {"a": 2}),
    ]
