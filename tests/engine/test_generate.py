"""The generation loop: streaming text, stop conditions, cancel, stats and clear errors."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch

from engine import Engine, EngineError, GenerationConfig, GenerationEvent, cpu_kernel
from engine.errors import ModelFormatError
from engine.generate import TextStream
from tests.engine.tiny_models import save_tiny, save_tiny_qwen_vocab

PROMPT = [5, 17, 42, 99, 7, 300, 12]


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("llama")
    save_tiny("llama", directory)
    return directory


@pytest.fixture(scope="module")
def eng(llama_dir: Path) -> Engine:
    return Engine.load(llama_dir, device="cpu", dtype="float32", max_seq_len=256)


@pytest.fixture(scope="module")
def qwen_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("qwen-vocab")
    save_tiny_qwen_vocab(directory)
    return directory


def greedy(eng: Engine, n: int, prompt: list[int] = PROMPT) -> list[GenerationEvent]:
    return list(eng.generate(prompt, GenerationConfig(max_new_tokens=n)))


# --- streaming text -------------------------------------------------------------------------

CHINESE = "你好，世界！𠀀𪚥龘😀🤖 中文测试：流式输出不应出现替换字符。"


def test_text_stream_holds_split_characters_back(qwen_dir: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(qwen_dir))
    ids = tokenizer.encode(CHINESE)
    assert any("\ufffd" in tokenizer.decode([i]) for i in ids)  # the text does split bytes
    stream = TextStream(tokenizer)
    pieces = [stream.push(i) for i in ids] + [stream.finish()]
    assert all("\ufffd" not in piece for piece in pieces)
    assert "".join(pieces) == tokenizer.decode(ids) == CHINESE


def test_generated_text_is_the_decode_of_the_ids(qwen_dir: Path) -> None:
    eng = Engine.load(qwen_dir, device="cpu", dtype="float32", max_seq_len=128)
    events = list(eng.chat([{"role": "user", "content": "你好"}],
                           GenerationConfig(max_new_tokens=24, temperature=1.0, seed=3)))
    ids = [ev.token_id for ev in events]
    text = "".join(ev.text for ev in events)
    assert text == eng.tokenizer.decode(ids, skip_special_tokens=True)
    assert all("\ufffd" not in ev.text for ev in events[:-1])
    assert eng.stats.prefill_tokens > 5  # the chat template wrapped the message


def test_chat_prompt_keeps_ids_above_65535(qwen_dir: Path) -> None:
    eng = Engine.load(qwen_dir, device="cpu", dtype="float32", max_seq_len=64)
    ids = eng.tokenizer.encode(eng.tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True))
    assert max(ids) > 151000
    logits = eng.logits(torch.tensor(ids, dtype=torch.int64))
    assert logits.shape == (len(ids), 151936)


def test_word_tokenizer_text_events(eng: Engine) -> None:
    events = greedy(eng, 10)
    joined = "".join(ev.text for ev in events)
    assert joined == eng.tokenizer.decode([ev.token_id for ev in events],
                                          skip_special_tokens=True)


# --- stopping -------------------------------------------------------------------------------

def test_max_new_tokens_and_finish_reason(eng: Engine) -> None:
    events = greedy(eng, 6)
    assert [ev.index for ev in events] == list(range(6))
    assert [ev.finish_reason for ev in events] == [None] * 5 + ["length"]
    assert greedy(eng, 0) == []


def test_stop_token_ends_generation(eng: Engine) -> None:
    reference = [ev.token_id for ev in greedy(eng, 12)]
    stop = reference[4]
    first = reference.index(stop)
    events = list(eng.generate(PROMPT, GenerationConfig(max_new_tokens=12,
                                                        stop_token_ids=(stop,))))
    assert [ev.token_id for ev in events] == reference[:first + 1]
    assert events[-1].finish_reason == "stop"
    assert eng.stats.finish_reason == "stop"


def test_generation_stops_when_the_cache_is_full(llama_dir: Path) -> None:
    eng = Engine.load(llama_dir, device="cpu", dtype="float32", max_seq_len=10)
    events = greedy(eng, 50)
    assert len(events) == 10 - len(PROMPT) + 1
    assert events[-1].finish_reason == "length"
    assert eng.stats.kv_tokens_used == 10


# --- cancel ---------------------------------------------------------------------------------

def test_cancel_inside_the_loop_stops_at_the_next_step(eng: Engine) -> None:
    events = []
    for ev in eng.generate(PROMPT, GenerationConfig(max_new_tokens=100)):
        events.append(ev)
        if len(events) == 3:
            eng.cancel()
    assert len(events) == 3
    assert eng.stats.finish_reason == "cancelled"


def test_cancel_from_another_thread(eng: Engine) -> None:
    events: list[GenerationEvent] = []
    started = threading.Event()

    def consume() -> None:
        for ev in eng.generate(PROMPT, GenerationConfig(max_new_tokens=240)):
            events.append(ev)
            started.set()

    worker = threading.Thread(target=consume)
    worker.start()
    assert started.wait(timeout=30)
    eng.cancel()
    seen_at_cancel = len(events)
    worker.join(timeout=30)
    assert not worker.is_alive()
    assert len(events) <= seen_at_cancel + 1 < 240
    assert eng.stats.finish_reason == "cancelled"
    # The engine stays usable and starts from a clean cache.
    assert [ev.token_id for ev in greedy(eng, 8)] == \
        [ev.token_id for ev in greedy(eng, 8)]


def test_a_second_generation_while_one_runs_is_refused(eng: Engine) -> None:
    running = eng.generate(PROMPT, GenerationConfig(max_new_tokens=5))
    next(running)
    with pytest.raises(EngineError, match="busy"):
        next(eng.generate(PROMPT, GenerationConfig(max_new_tokens=5)))
    running.close()
    assert len(greedy(eng, 2)) == 2


# --- stats ----------------------------------------------------------------------------------

def test_stats_after_generation(eng: Engine) -> None:
    events = greedy(eng, 20)
    stats = eng.stats
    assert stats.device == "cpu" and stats.dtype == "float32" and stats.fp8_mode == "none"
    assert stats.ttft_s is not None and stats.ttft_s > 0
    assert stats.prefill_tokens == len(PROMPT) and stats.prefill_tokens_per_s
    assert stats.decode_tokens == len(events) - 1 and stats.decode_tokens_per_s
    assert stats.kv_tokens_used == len(PROMPT) + len(events) - 1
    assert stats.kv_layout == "BSND" and stats.kv_alignment_bytes >= 64
    # the compiled CPU kernel's RMSNorm, admitted by its self-check (engine.ops)
    assert stats.fused_ops == (("cpu_kernel_rms_norm",) if cpu_kernel.kernel() else ())
    assert 0 < stats.kv_occupancy < 1


# --- errors ---------------------------------------------------------------------------------

def test_prompt_longer_than_max_seq_len_is_a_clear_error(llama_dir: Path) -> None:
    eng = Engine.load(llama_dir, device="cpu", dtype="float32", max_seq_len=8)
    with pytest.raises(EngineError, match="max_seq_len is 8"):
        list(eng.generate(list(range(3, 12)), GenerationConfig(max_new_tokens=2)))
    with pytest.raises(EngineError, match="max_seq_len"):
        eng.logits(list(range(3, 12)))


@pytest.mark.parametrize(("ids", "message"), [([], "empty"), ([3, 512], "outside")])
def test_bad_prompts(eng: Engine, ids: list[int], message: str) -> None:
    with pytest.raises(EngineError, match=message):
        eng.generate(ids, GenerationConfig(max_new_tokens=2))


@pytest.mark.parametrize("kwargs", [{"fp8": "fp4"}, {"kv_cache": "fp8"}, {"max_seq_len": 0},
                                    {"device": "tpu"}, {"dtype": "int4"}])
def test_bad_load_options(llama_dir: Path, kwargs: dict[str, object]) -> None:
    with pytest.raises(EngineError):
        Engine.load(llama_dir, **kwargs)  # type: ignore[arg-type]


def test_missing_tokenizer(llama_dir: Path, tmp_path: Path) -> None:
    for name in ("config.json", "model.safetensors", "generation_config.json"):
        (tmp_path / name).write_bytes((llama_dir / name).read_bytes())
    with pytest.raises(ModelFormatError, match="no tokenizer files"):
        Engine.load(tmp_path, device="cpu", dtype="float32")
    eng = Engine.load(tmp_path, device="cpu", dtype="float32", max_seq_len=32,
                      require_tokenizer=False)
    assert eng.tokenizer is None
    events = greedy(eng, 4)
    assert len(events) == 4 and all(ev.text == "" for ev in events)
    with pytest.raises(EngineError, match="chat template"):
        eng.chat([{"role": "user", "content": "hi"}])


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(ModelFormatError, match="no such model"):
        Engine.load(tmp_path / "nope", device="cpu")
