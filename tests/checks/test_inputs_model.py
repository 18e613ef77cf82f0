"""--model is located through the one model-directory reader (probes.model.reader.locate_model):
one path question, one line for each way it is not a model directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from checks import inputs
from checks.errors import UsageError
from checks.options import HostOptions
from probes.errors import NotRecorded
from probes.live import LiveHost
from probes.target.model import ServingArgs, Target
from probes.target.parts import Sourced

LIVE = HostOptions()


class Counting(LiveHost):
    """A LiveHost that counts the path questions it is asked."""

    def __init__(self) -> None:
        super().__init__(root="/", env={})
        self.kinds: list[str] = []

    def kind(self, path: str):  # type: ignore[no-untyped-def]
        self.kinds.append(path)
        return super().kind(path)


def test_a_directory_is_one_path_question(tmp_path: Path) -> None:
    host = Counting()
    assert inputs.model_dir(str(tmp_path), LIVE, host) == tmp_path
    assert host.kinds == [str(tmp_path)]


@pytest.mark.parametrize(("make", "words"), [
    ("missing", "no such model directory or .gguf file"),
    ("file", "a file, not a model directory"),
    ("fifo", "a FIFO, socket or other special file, not a model directory"),
    ("gguf", "a .gguf file; the doctor's checks read a model directory"),
])
def test_what_is_not_a_model_directory_is_one_line(tmp_path: Path, make: str,
                                                   words: str) -> None:
    path = tmp_path / ("m.gguf" if make == "gguf" else "m")
    if make in ("file", "gguf"):
        path.write_text("x")
    elif make == "fifo":
        os.mkfifo(path)
    with pytest.raises(UsageError) as raised:
        inputs.model_dir(str(path), LIVE, LiveHost(root="/", env={}))
    message = str(raised.value)
    assert message.startswith(f"--model {path}") and words in message
    assert "\n" not in message


def test_a_recording_that_never_saw_the_path_is_left_to_the_checks() -> None:
    class Unrecorded(LiveHost):
        def kind(self, path: str):  # type: ignore[no-untyped-def]
            raise NotRecorded(path)

    found = inputs.model_dir("/models/m", HostOptions(root="/x"), Unrecorded(root="/", env={}))
    assert found == Path("/models/m")


def test_the_user_s_model_overrides_the_command_line(tmp_path: Path) -> None:
    served = tmp_path / "served"
    given = tmp_path / "given"
    served.mkdir()
    given.mkdir()
    target = Target("process", "p", "c", "e", serving=ServingArgs(
        server="vllm", model_dir=Sourced(str(served), "`vllm serve` on the command line")))
    host = LiveHost(root="/", env={})
    assert inputs.model_dir(None, LIVE, host, target) == served
    assert inputs.model_dir(str(given), LIVE, host, target) == given
