"""--env-file: systemd EnvironmentFile lines, `docker inspect` JSON, and what is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from probes.target.envfile import EnvFileError, parse_env_file, read_env_file

UNIT_ENV = r"""# /etc/vllm/ascend.env, EnvironmentFile= of vllm.service
; a comment too
ASCEND_HOME_PATH=/usr/local/Ascend/ascend-toolkit/latest
ASCEND_GLOBAL_LOG_LEVEL="1"
LD_LIBRARY_PATH='/usr/local/Ascend/driver/lib64:/usr/local/Ascend/driver/lib64/common'
MESSAGE="a \"quoted\" word"
LONG=one \
two
not an assignment
export HCCL_CONNECT_TIMEOUT=1200
"""


def test_environment_file_lines() -> None:
    found = parse_env_file(UNIT_ENV)
    assert found.shape == "EnvironmentFile lines"
    assert found.env == {
        "ASCEND_HOME_PATH": "/usr/local/Ascend/ascend-toolkit/latest",
        "ASCEND_GLOBAL_LOG_LEVEL": "1",
        "LD_LIBRARY_PATH": "/usr/local/Ascend/driver/lib64:/usr/local/Ascend/driver/lib64/common",
        "MESSAGE": 'a "quoted" word',
        "LONG": "one two",
        "HCCL_CONNECT_TIMEOUT": "1200",
    }
    assert found.notes == ("`export ` prefixes were read as plain assignments",)


def test_docker_inspect_json() -> None:
    doc = [{"Id": "abc", "Config": {"Env": ["PATH=/usr/bin", "ASCEND_RT_VISIBLE_DEVICES=0,1",
                                             "EMPTY=", "junk"]}}, {"Config": {"Env": []}}]
    found = parse_env_file(json.dumps(doc, indent=2))
    assert found.shape == "docker inspect JSON"
    assert found.env == {"PATH": "/usr/bin", "ASCEND_RT_VISIBLE_DEVICES": "0,1", "EMPTY": ""}
    assert "the first is read" in found.notes[0]


@pytest.mark.parametrize(("text", "message"), [
    ("[]", "no container"),
    ('{"Config": {}}', "no Config.Env"),
    ("[{oops", "not JSON"),
    ("A B=1\n", "line 1: 'A B' is not a variable name"),
    ('X="open\n', "unclosed quote"),
])
def test_bad_files_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(EnvFileError, match=message):
        parse_env_file(text)


def test_reading_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(EnvFileError, match=f"{tmp_path}/none: No such file"):
        read_env_file(str(tmp_path / "none"))
    binary = tmp_path / "bin.env"
    binary.write_bytes(b"\xff\xfe")
    with pytest.raises(EnvFileError, match="not UTF-8"):
        read_env_file(str(binary))
