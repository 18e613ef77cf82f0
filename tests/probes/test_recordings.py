"""The default place of the console's recordings, resolved from an environment alone."""

from __future__ import annotations

from pathlib import Path

from probes.recordings import default_recordings_dir, new_recording_path, newest_first_key


def test_default_recordings_dir_precedence() -> None:
    env = {"HOME": "/home/op", "XDG_STATE_HOME": "/state", "ASCEND_CONSOLE_RECORDINGS": "/recs"}
    assert default_recordings_dir(env) == Path("/recs")
    del env["ASCEND_CONSOLE_RECORDINGS"]
    assert default_recordings_dir(env) == Path("/state/ascend-console/recordings")
    env["XDG_STATE_HOME"] = "relative/state"  # ignored, as the XDG spec says
    assert default_recordings_dir(env) == Path("/home/op/.local/state/ascend-console/recordings")
    del env["XDG_STATE_HOME"]
    assert default_recordings_dir(env) == Path("/home/op/.local/state/ascend-console/recordings")
    assert default_recordings_dir({"ASCEND_CONSOLE_RECORDINGS": ""}) == Path(
        "~/.local/state/ascend-console/recordings")  # no HOME: the caller expands or refuses


def test_default_names_sort_newest_last() -> None:
    old = new_recording_path(Path("/r"), "atlas 7", now=1_700_000_000.0)
    new = new_recording_path(Path("/r"), "zz", now=1_700_000_060.0)
    assert old == Path("/r/atlas_7-20231114T221320Z.sqlite")
    assert max([new.name, old.name, "other.sqlite"], key=newest_first_key) == new.name
