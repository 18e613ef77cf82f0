"""tokenizer.dtype judges the tokenizer the serving engine will use, as it will use it: the
target's `vllm serve` flags read against real Qwen3 tokenizer directories (built from
qwen.tiktoken by tests/tokenizer_fixtures.py), each rule firing and a healthy twin quiet."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from test_target import PID, by_id, container, run

from checks.builtin.tokenizer import tokenizer_dtype
from checks.builtin.tokenizer_ids import tokenizer_token_ids
from checks.builtin.tokenizer_serving import difference
from checks.context import Context
from checks.model import Finding
from checks.policy import load_policy
from probes.live import LiveHost
from probes.target.model import ServingArgs, Target
from probes.target.parts import ProcessInfo, Sourced
from tests.tokenizer_fixtures import write_qwen3_model_dir

# ChatML that ignores enable_thinking: what a generic --chat-template gives a Qwen3 model.
PLAIN_CHATML = ("{%- for message in messages -%}{{- '<|im_start|>' + message['role'] + '\\n' + "
                "message['content'] + '<|im_end|>\\n' -}}{%- endfor -%}"
                "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_qwen3_model_dir(tmp_path_factory.mktemp("qwen3") / "model")


@pytest.fixture
def model(built: Path, tmp_path: Path) -> Path:
    """A fresh copy each test may edit."""
    return Path(shutil.copytree(built, tmp_path / "Qwen3-30B-A3B"))


def ctx_for(model: Path, *flags: str, cwd: str | None = None,
            host: LiveHost | None = None) -> Context:
    """A run judging `model`; with flags, a `vllm serve MODEL FLAGS` process serving it."""
    ctx = Context(host or LiveHost(root="/", env={}), load_policy(None), model_dir=model)
    if flags or cwd:
        argv = ("vllm", "serve", str(model), *flags)
        ctx.target = Target(
            "process", "vllm serve", "test", "test", process=ProcessInfo(4242, argv, cwd=cwd),
            serving=ServingArgs(server="vllm", model=Sourced(str(model), "argv"),
                                model_dir=Sourced(str(model), "argv")))
    return ctx


def text_of(finding: Finding) -> str:
    return "\n".join([finding.summary, *finding.evidence, finding.remedy])


def edit_json(path: Path, **changes: Any) -> None:
    document = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            document.pop(key, None)
        else:
            document[key] = value
    path.write_text(json.dumps(document))


# -- the effective tokenizer -------------------------------------------------------------------


def test_a_healthy_served_model_passes_naming_what_was_judged(model: Path) -> None:
    finding = tokenizer_dtype(ctx_for(model, "--tokenizer-mode", "auto"))
    assert finding.status == "pass", text_of(finding)
    assert finding.rules == ()
    text = text_of(finding)
    assert f"tokenizer judged: {model} (the model directory), mode auto " \
        "(`--tokenizer-mode auto`); files of this machine" in text
    assert "chat template judged: tokenizer_config.json" in text
    assert "a turn ends with <|im_end|>, a token the engine stops on" in finding.summary
    assert "the engine stops on 151645 (tokenizer eos_token), 151643 " in text
    assert "enable_thinking=false renders '<think>\\n\\n</think>\\n\\n' where true renders " \
        "nothing" in text


def test_the_tokenizer_flag_picks_the_files_judged(model: Path, tmp_path: Path) -> None:
    other = Path(shutil.copytree(model, tmp_path / "tok"))
    edit_json(other / "tokenizer_config.json", eos_token="<|not-a-token|>")
    finding = tokenizer_dtype(ctx_for(model, "--tokenizer", "tok", cwd=str(tmp_path)))
    assert finding.status == "fail" and finding.rules == ("special-token-missing",)
    assert f"tokenizer judged: {other} (`--tokenizer tok` on the command line)" in \
        text_of(finding)
    assert tokenizer_dtype(ctx_for(model, "--tokenizer", str(model))).status == "pass"


def test_a_tokenizer_flag_that_names_nothing_here_keeps_the_model_s(model: Path) -> None:
    finding = tokenizer_dtype(ctx_for(model, "--tokenizer", "Qwen/Qwen3-Missing"))
    assert finding.status == "pass", text_of(finding)
    assert "`--tokenizer Qwen/Qwen3-Missing`: model Qwen/Qwen3-Missing: not a directory, and " \
        "not in the Hugging Face cache of its environment; the model directory's tokenizer " \
        "is judged instead" in text_of(finding)


def test_a_template_written_on_the_command_line_is_judged(model: Path) -> None:
    finding = tokenizer_dtype(ctx_for(model, "--chat-template", PLAIN_CHATML))
    assert finding.status == "warn" and finding.rules == ("thinking-ignored",)
    assert "(the flag's own text)" in text_of(finding)


def test_a_command_line_of_another_model_is_not_applied(model: Path, tmp_path: Path) -> None:
    ctx = ctx_for(model, "--chat-template", "/nowhere/t.jinja")
    ctx.model_dir = Path(shutil.copytree(model, tmp_path / "other"))
    finding = tokenizer_dtype(ctx)
    assert finding.status == "pass", text_of(finding)
    assert "its tokenizer flags are not applied" in text_of(finding)


def test_files_under_another_root_are_said_to_be_its(model: Path, tmp_path: Path) -> None:
    shutil.copytree(model, tmp_path / "tree" / "models" / "q")
    ctx = ctx_for(Path("/models/q"), host=LiveHost(root=str(tmp_path / "tree"), env={}))
    finding = tokenizer_dtype(ctx)
    assert finding.status == "pass", text_of(finding)
    assert "tokenizer judged: /models/q (the model directory); files under --root " \
        f"{tmp_path / 'tree'}" in text_of(finding)


# -- --chat-template ---------------------------------------------------------------------------


def test_a_chat_template_that_cannot_be_opened_fails(model: Path, tmp_path: Path) -> None:
    finding = tokenizer_dtype(ctx_for(model, "--chat-template", str(tmp_path / "no.jinja")))
    assert finding.status == "fail" and finding.rules == ("chat-template-unreadable",)
    assert "looks like a file path, but it failed to be opened" in finding.summary


def test_a_bare_template_name_is_not_in_our_data(model: Path, tmp_path: Path) -> None:
    finding = tokenizer_dtype(ctx_for(model, "--chat-template", "tool_chat.jinja",
                                      cwd=str(tmp_path)))
    assert finding.status == "warn" and finding.rules == ("chat-template-unreadable",)
    assert "not in our data" in finding.summary


def test_a_template_file_from_the_working_directory_is_the_one_judged(
        model: Path, tmp_path: Path) -> None:
    own = (model / "tokenizer_config.json").read_text()
    (tmp_path / "qwen3.jinja").write_text(json.loads(own)["chat_template"])
    finding = tokenizer_dtype(ctx_for(model, "--chat-template", "qwen3.jinja",
                                      cwd=str(tmp_path)))
    assert finding.status == "pass", text_of(finding)
    assert f"chat template judged: `--chat-template qwen3.jinja` ({tmp_path}/qwen3.jinja)" in \
        text_of(finding)


# -- the end of a turn against the ids the engine stops on -------------------------------------


def test_an_end_of_turn_the_engine_does_not_stop_on_fails(model: Path) -> None:
    """vllm-project/vllm#4180: Llama 3 Instruct ended turns with <|eot_id|> while its
    tokenizer_config.json and generation_config.json named only <|end_of_text|>, and vLLM ran
    every answer to max_tokens. The same shape on Qwen3: eos <|endoftext|> everywhere, turns
    ended by <|im_end|>."""
    edit_json(model / "tokenizer_config.json", eos_token="<|endoftext|>")
    edit_json(model / "generation_config.json", eos_token_id=151643)
    finding = tokenizer_dtype(ctx_for(model))
    assert finding.status == "fail" and finding.rules == ("end-of-turn-not-eos",)
    assert finding.summary.startswith("the chat template ends a turn with <|im_end|> (151645), "
                                      "which is not a token the engine stops on")
    assert "the engine stops on 151643 (tokenizer eos_token)" in text_of(finding)
    assert "stop_token_ids" in finding.remedy


def test_the_same_tokenizer_with_the_turn_end_in_generation_config_passes(model: Path) -> None:
    """The fix vLLM and Meta made for #4180: generation_config.json lists the end of turn."""
    edit_json(model / "tokenizer_config.json", eos_token="<|endoftext|>")
    edit_json(model / "generation_config.json", eos_token_id=[151645, 151643])
    finding = tokenizer_dtype(ctx_for(model))
    assert finding.status == "pass", text_of(finding)
    assert "151645 (generation_config.json eos_token_id)" in text_of(finding)


def test_generation_config_vllm_reads_no_generation_config(model: Path) -> None:
    edit_json(model / "tokenizer_config.json", eos_token="<|endoftext|>")
    assert tokenizer_dtype(ctx_for(model)).status == "pass"
    finding = tokenizer_dtype(ctx_for(model, "--generation-config", "vllm"))
    assert finding.status == "fail" and finding.rules == ("end-of-turn-not-eos",)
    assert "`--generation-config vllm` reads no generation_config.json" in finding.summary


def test_without_generation_config_the_config_json_eos_counts(model: Path) -> None:
    """vllm-project/vllm#5954: config.json's eos_token_id when there is no generation config."""
    edit_json(model / "tokenizer_config.json", eos_token="<|endoftext|>")
    (model / "generation_config.json").unlink()
    finding = tokenizer_dtype(ctx_for(model))
    assert finding.status == "pass", text_of(finding)
    assert "151645 (config.json eos_token_id)" in text_of(finding)


# -- special tokens against the configs --------------------------------------------------------


def test_a_config_eos_with_no_token_fails(model: Path) -> None:
    edit_json(model / "config.json", eos_token_id=151700)  # inside the embedding, no token
    finding = tokenizer_dtype(ctx_for(model))
    assert finding.status == "fail" and finding.rules == ("special-token-missing",)
    assert "config.json eos_token_id = 151700 names no token of the tokenizer (151669 ids)" \
        in finding.summary


def test_a_special_token_outside_the_vocabulary_fails(model: Path) -> None:
    edit_json(model / "tokenizer_config.json", pad_token="<|pad|>")
    finding = tokenizer_dtype(ctx_for(model))
    assert finding.status == "fail" and finding.rules == ("special-token-missing",)
    assert "tokenizer_config.json pad_token '<|pad|>' is not in the tokenizer's vocabulary" \
        in finding.summary


def test_no_pad_token_is_said_never_judged(model: Path) -> None:
    edit_json(model / "tokenizer_config.json", pad_token=None, padding_side="right")
    finding = tokenizer_dtype(ctx_for(model))
    assert finding.status == "pass" and finding.rules == ("pad-token",)
    assert "no pad_token and padding_side 'right'" in text_of(finding)
    assert "vLLM does not pad prompts" in text_of(finding)


# -- enable_thinking ---------------------------------------------------------------------------


def test_a_template_override_that_drops_enable_thinking_warns(model: Path,
                                                               tmp_path: Path) -> None:
    (tmp_path / "chatml.jinja").write_text(PLAIN_CHATML)
    finding = tokenizer_dtype(ctx_for(model, "--chat-template", str(tmp_path / "chatml.jinja")))
    assert finding.status == "warn" and finding.rules == ("thinking-ignored",)
    assert "ignores enable_thinking, which the model's own template honours" in finding.summary
    assert "<|im_start|>assistant\\n" in finding.summary


def test_a_template_that_reads_enable_thinking_and_ignores_it_warns(model: Path) -> None:
    edit_json(model / "tokenizer_config.json",
              chat_template="{%- set thinking = enable_thinking | default(true) -%}"
              + PLAIN_CHATML)
    finding = tokenizer_dtype(ctx_for(model))
    assert finding.status == "warn" and finding.rules == ("thinking-ignored",)
    assert "reads enable_thinking but renders the same prompt" in finding.summary


def test_a_template_without_enable_thinking_is_not_judged(model: Path) -> None:
    edit_json(model / "tokenizer_config.json", chat_template=PLAIN_CHATML)
    finding = tokenizer_dtype(ctx_for(model))
    assert finding.status == "pass", text_of(finding)
    assert "does not read enable_thinking" in text_of(finding)


def test_difference_shows_what_changes() -> None:
    assert difference("a<x>b", "a<y>b") == "enable_thinking=false renders 'y' where true " \
        "renders 'x'"


# -- the mode and the model's own code ---------------------------------------------------------


def test_slow_mode_without_python_tokenizer_files_warns(model: Path) -> None:
    finding = tokenizer_dtype(ctx_for(model, "--tokenizer-mode", "slow"))
    assert finding.status == "warn" and finding.rules == ("tokenizer-mode",)
    assert "vocab.json + merges.txt" in finding.summary


def test_a_mode_not_in_our_data_warns(model: Path) -> None:
    finding = tokenizer_dtype(ctx_for(model, "--tokenizer-mode", "plugin_x"))
    assert finding.status == "warn" and finding.rules == ("tokenizer-mode",)
    assert "not in our data" in finding.summary


def test_the_model_s_own_tokenizer_code_needs_trust_remote_code(model: Path) -> None:
    edit_json(model / "tokenizer_config.json",
              auto_map={"AutoTokenizer": ["tokenization_x.XTokenizer", None]})
    finding = tokenizer_dtype(ctx_for(model, "--tokenizer-mode", "auto"))
    assert finding.status == "warn" and finding.rules == ("remote-code",)
    assert "no --trust-remote-code" in finding.summary
    trusted = tokenizer_dtype(ctx_for(model, "--trust-remote-code"))
    assert trusted.status == "pass", text_of(trusted)
    assert "the doctor never runs it" in text_of(trusted)
    last = tokenizer_dtype(ctx_for(model, "--trust-remote-code", "--no-trust-remote-code"))
    assert last.rules == ("remote-code",)


def test_token_ids_judges_the_same_served_tokenizer(model: Path, tmp_path: Path) -> None:
    other = Path(shutil.copytree(model, tmp_path / "tok"))
    (other / "config.json").unlink()
    edit_json(model / "config.json", vocab_size=65536)
    finding = tokenizer_token_ids(ctx_for(model, "--tokenizer", str(other)))
    assert finding.status == "fail" and finding.rules[0] == "id-past-embedding"



# -- a container target --------------------------------------------------------------------------


@pytest.fixture
def fake_proc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """/proc read from the test's tree, where container() puts process PID."""
    monkeypatch.setattr("probes.target.proc.PROC", str(tmp_path / "proc"))
    return tmp_path / "proc"


def container_serving(tmp_path: Path, *flags: str) -> tuple[dict[str, str], Path]:
    """test_target's container (process PID in another mount namespace) serving a real Qwen3
    tokenizer directory with `flags`; a ChatML template exists only inside the container."""
    tree, shell = container(tmp_path)
    write_qwen3_model_dir(tree.path / "models" / "qwen")
    tree.file("/templates/chatml.jinja", PLAIN_CHATML)
    proc = tmp_path / "proc" / str(PID)
    argv = ["/usr/bin/python3.10", "/usr/local/bin/vllm", "serve", "/models/qwen", *flags]
    (proc / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    return shell, proc / "root"


@pytest.mark.usefixtures("fake_proc")
def test_a_containers_template_override_is_read_through_its_root(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shell, root = container_serving(tmp_path, "--chat-template", "/templates/chatml.jinja")
    assert not Path("/templates/chatml.jinja").exists()
    _, doc = run(shell, ["--pid", str(PID), "--json", "--only", "tokenizer.dtype"], capsys)
    result = by_id(doc)["tokenizer.dtype"]
    assert result["status"] == "warn" and result["rules"] == ["thinking-ignored"]
    assert "chat template judged: `--chat-template /templates/chatml.jinja` " \
        "(/templates/chatml.jinja)" in result["evidence"]
    assert any(line.endswith(f"files of process {PID}'s container, read through {root}")
               for line in result["evidence"])


@pytest.mark.usefixtures("fake_proc")
def test_the_same_container_with_its_own_template_passes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shell, _ = container_serving(tmp_path, "--tensor-parallel-size", "2")
    _, doc = run(shell, ["--pid", str(PID), "--json", "--only", "tokenizer.dtype"], capsys)
    result = by_id(doc)["tokenizer.dtype"]
    assert result["status"] == "pass", result
    assert any(line.startswith("tokenizer judged: /models/qwen (the model directory), mode "
                               "auto (vLLM's default); files of process")
               for line in result["evidence"])
