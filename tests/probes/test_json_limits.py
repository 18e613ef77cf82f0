"""JSON from outside: deep, large and surrogate-laden documents end in one line or clean
text, wherever the doctor and the console parse it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from probes.http import error_message
from probes.json_limits import JSONLimitError, depth, loads
from probes.live import LiveHost
from probes.target.envfile import EnvFileError, read_env_file
from probes.target.serving import mindie_args


@pytest.mark.parametrize("levels", [65, 140_000, 1_000_000])
def test_deep_documents_are_refused_quickly(levels: int) -> None:
    with pytest.raises(JSONLimitError, match="nested more than 64 levels") as caught:
        loads("[" * levels + "]" * levels, "doc")
    assert "\n" not in str(caught.value)


def test_brackets_inside_strings_do_not_count() -> None:
    text = json.dumps({"a": "[[[[{{{{" * 1000, "b": ["\\\"[", {"c": 1}]})
    assert depth(text) == 3
    assert loads(text, "doc")["b"][1] == {"c": 1}


def test_size_is_checked_before_parsing() -> None:
    with pytest.raises(JSONLimitError, match="over 10 bytes"):
        loads("[1, 2, 3, 4]", "doc", max_bytes=10)


def test_lone_surrogates_become_replacement_characters() -> None:
    doc = loads('{"A\\udc80": ["x\\ud800y", "\\ud83d\\ude00"]}', "doc")
    assert doc == {"A\ufffd": ["x\ufffdy", "\U0001f600"]}
    json.dumps(doc, ensure_ascii=False).encode("utf-8")  # writable as UTF-8


@given(st.recursive(st.none() | st.integers() | st.text(), lambda kids: st.lists(kids) |
                    st.dictionaries(st.text(), kids), max_leaves=20))
def test_ordinary_documents_read_as_json_reads_them(value: object) -> None:
    text = json.dumps(value)
    got = loads(text, "doc")
    assert json.dumps(got, ensure_ascii=False).encode("utf-8", "strict")


def test_env_file_deep_json_and_lone_surrogate(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 140_000 + "]" * 140_000)
    with pytest.raises(EnvFileError, match="nested more than") as caught:
        read_env_file(str(deep))
    assert str(deep) in str(caught.value)
    odd = tmp_path / "odd.json"
    odd.write_text('[{"Config": {"Env": ["X=\\udc80"]}}]')
    assert read_env_file(str(odd)).env == {"X": "\ufffd"}


def test_deep_mindie_config_is_a_note(tmp_path: Path) -> None:
    conf = tmp_path / "config.json"
    conf.write_text('{"BackendConfig": ' + "[" * 100_000 + "]" * 100_000 + "}")
    env = {"MIES_CONFIG_JSON_PATH": str(conf)}
    args = mindie_args(LiveHost(env=env), env, None)
    assert "nested more than" in args.notes[0] and args.world_size is None


def test_mindie_numbers_out_of_range_are_notes(tmp_path: Path) -> None:
    conf = tmp_path / "config.json"
    conf.write_text('{"BackendConfig": {"ModelDeployConfig": {"maxSeqLen": 0, "ModelConfig": '
                    '[{"worldSize": ' + "9" * 4000 + ', "npuMemSize": -1}]}}}')
    env = {"MIES_CONFIG_JSON_PATH": str(conf)}
    args = mindie_args(LiveHost(env=env), env, None)
    assert args.world_size is None and args.max_model_len is None
    assert args.npu_mem_size_gb is not None and args.npu_mem_size_gb.value == -1
    assert any("4000-digit" in n for n in args.notes)
    assert any("maxSeqLen: 0 is out of range" in n for n in args.notes)


def test_deep_error_bodies_are_shown_as_text() -> None:
    assert error_message("[" * 200_000) .startswith("[[[")
