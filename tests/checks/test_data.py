"""The knowledge files under checks/data/ and their one typed loader."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from checks import data


@dataclass(frozen=True)
class _Row:
    id: str
    meaning: str
    sources: tuple[str, ...]
    codes: tuple[str, ...] = ()
    fixed_in: str | None = None
    weight: float = 1.0


def _doc(*rows: dict[str, object]) -> dict[str, object]:
    return {"topic": "demo", "schema": 1, "rows": list(rows)}


_GOOD: dict[str, object] = {"id": "a", "meaning": "m", "sources": ["https://example.org/x"]}


def test_every_shipped_topic_validates_with_its_registered_row_type() -> None:
    counts = data.validate_all()
    assert set(counts) == set(data.topics())
    assert all(n > 0 for n in counts.values())


def test_every_registered_topic_has_a_file() -> None:
    assert set(data.ROW_TYPES) <= set(data.topics())


def test_rows_become_typed_frozen_instances() -> None:
    rows = data.rows_from(_doc({**_GOOD, "codes": ["EZ1001"], "weight": 2}), _Row, "f", "demo")
    assert rows == (_Row("a", "m", ("https://example.org/x",), ("EZ1001",), None, 2.0),)


@pytest.mark.parametrize("sources", [[], None, ["see the team wiki"],
                                     ["../shared/facts/COMPAT.yaml"], ["FACTCHECK.md"]])
def test_a_row_without_an_openable_source_fails(sources: object) -> None:
    with pytest.raises(data.DataError, match="source"):
        data.rows_from(_doc({**_GOOD, "sources": sources}), _Row, "f.yaml", "demo")


@pytest.mark.parametrize("source", [
    "https://github.com/vllm-project/vllm-ascend/issues/1670",
    "vllm-project/vllm-ascend#1670",
    "Ascend/pytorch torch_npu/npu/utils.py @ v2.5.1-7.0.0",
    "vllm-project/vllm-ascend @ v0.9.1",
])
def test_openable_sources_pass(source: str) -> None:
    assert data.rows_from(_doc({**_GOOD, "sources": [source]}), _Row, "f", "demo")


def test_duplicate_ids_unknown_and_missing_fields_name_the_row() -> None:
    with pytest.raises(data.DataError, match=r"f\.yaml: row 2 \(id='a'\).*repeats row 1"):
        data.rows_from(_doc(_GOOD, _GOOD), _Row, "f.yaml", "demo")
    with pytest.raises(data.DataError, match=r"unknown field.*colour"):
        data.rows_from(_doc({**_GOOD, "colour": "red"}), _Row, "f", "demo")
    with pytest.raises(data.DataError, match="missing field `meaning`"):
        data.rows_from(_doc({"id": "a", "sources": ["https://x.org"]}), _Row, "f", "demo")


def test_wrong_types_and_wrong_headers_are_refused() -> None:
    with pytest.raises(data.DataError, match=r"field `codes`.*list"):
        data.rows_from(_doc({**_GOOD, "codes": "EZ1001"}), _Row, "f", "demo")
    with pytest.raises(data.DataError, match="field `weight`"):
        data.rows_from(_doc({**_GOOD, "weight": True}), _Row, "f", "demo")
    with pytest.raises(data.DataError, match="topic"):
        data.rows_from({"topic": "other", "schema": 1, "rows": [_GOOD]}, _Row, "f", "demo")
    with pytest.raises(data.DataError, match="schema"):
        data.rows_from({"topic": "demo", "schema": 2, "rows": [_GOOD]}, _Row, "f", "demo")
    with pytest.raises(data.DataError, match="rows"):
        data.rows_from({"topic": "demo", "schema": 1, "rows": []}, _Row, "f", "demo")


def test_duplicate_yaml_keys_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "demo.yaml"
    path.write_text("topic: demo\nschema: 1\nrows:\n  - id: a\n    id: b\n", encoding="utf-8")
    with pytest.raises(data.DataError, match=r"demo\.yaml:5: duplicate key 'id'"):
        data.validate_file(path)
