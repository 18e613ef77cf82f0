"""engine.tokenizer_load: where transformers would parse tokenizer.json in Python only for
its added tokens, they are read up to that member and passed in; the tokenizer is the same
(tokens, special tokens, ids, chat template); anywhere else transformers reads the files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from demo_models.qwen_tokenizer import write_qwen3_tokenizer
from engine.tokenizer_load import added_tokens_kwargs, load_tokenizer, top_level_value

TEXT = "Hello <|im_start|>user\nworld<|im_end|> ünïcödé 12345 <|endoftext|>"


@pytest.fixture(scope="module")
def saved_without_decoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tokenizer directory as transformers 5 saves one: no added_tokens_decoder."""
    directory = write_qwen3_tokenizer(tmp_path_factory.mktemp("v5") / "tok")
    config_file = directory / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    del config["added_tokens_decoder"]
    config_file.write_text(json.dumps(config))
    return directory


def test_the_added_tokens_are_passed_in(saved_without_decoder: Path) -> None:
    document = json.loads((saved_without_decoder / "tokenizer.json").read_text())
    passed = added_tokens_kwargs(saved_without_decoder)["added_tokens_decoder"]
    assert sorted(passed) == sorted(t["id"] for t in document["added_tokens"])
    first = document["added_tokens"][0]
    assert passed[first["id"]] == {k: v for k, v in first.items() if k != "id"}


def test_the_tokenizer_is_the_one_transformers_builds(saved_without_decoder: Path) -> None:
    from transformers import AutoTokenizer

    plain = AutoTokenizer.from_pretrained(str(saved_without_decoder), local_files_only=True)
    ours = load_tokenizer(saved_without_decoder, ("tokenizer.json", "tokenizer_config.json"),
                          True)
    assert type(ours) is type(plain)
    assert repr(ours.added_tokens_decoder) == repr(plain.added_tokens_decoder)
    assert ours.all_special_tokens == plain.all_special_tokens
    assert (ours.eos_token_id, ours.pad_token_id) == (plain.eos_token_id, plain.pad_token_id)
    ids = plain(TEXT)["input_ids"]
    assert ours(TEXT)["input_ids"] == ids
    assert ours.decode(ids, skip_special_tokens=True) == plain.decode(ids,
                                                                      skip_special_tokens=True)
    chat = [{"role": "user", "content": "hi"}]
    assert ours.apply_chat_template(chat, tokenize=False, add_generation_prompt=True) == \
        plain.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)


def test_transformers_reads_the_files_itself_elsewhere(saved_without_decoder: Path,
                                                       tmp_path: Path) -> None:
    for name in ("special_tokens_map.json", "added_tokens.json"):
        other = tmp_path / name.split(".")[0]
        other.mkdir()
        for source in saved_without_decoder.iterdir():
            (other / source.name).write_bytes(source.read_bytes())
        (other / name).write_text("{}")
        assert added_tokens_kwargs(other) == {}, name
    with_decoder = write_qwen3_tokenizer(tmp_path / "with-decoder")
    assert added_tokens_kwargs(with_decoder) == {}
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "tokenizer_config.json").write_text("{}")
    (broken / "tokenizer.json").write_text('{"version": "1.0", "added_tokens": [{"id": ')
    assert added_tokens_kwargs(broken) == {}
    (broken / "tokenizer.json").write_text('{"added_tokens": [{"content": "x"}]}')  # no id
    assert added_tokens_kwargs(broken) == {}


def test_the_member_is_read_without_what_follows_it() -> None:
    text = ' \n{"version" : "1.0", "truncation": null,\n "added_tokens": [1, {"a": "}"}],' \
           ' "model": this is never parsed'
    assert top_level_value(text, "added_tokens") == [1, {"a": "}"}]
    assert top_level_value('{"a": {"added_tokens": 1}, "added_tokens": 2}', "added_tokens") == 2
    for bad in ('[1, 2]', '{"a": 1}', '{"a" 1}', '{"a": 1 "b": 2}', '', '{"a": }'):
        with pytest.raises(ValueError):
            top_level_value(bad, "added_tokens")
