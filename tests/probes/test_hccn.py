"""hccn_tool's link and net health lines, read from recorded vendor outputs and from a real
process standing in for the tool (tests/data/hccn/README.md says where each line is printed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FakeRoot

from probes.errors import ParseError
from probes.hccn import HCCN_TOOL, parse_status, read_ports
from probes.live import LiveHost

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "hccn"
PATH = "/usr/local/bin:/usr/bin:/bin"


@pytest.mark.parametrize("sample, field, word", [
    ("link-up.txt", "link", "UP"),
    ("link-down.txt", "link", "DOWN"),
    ("net-health-init.txt", "net_health", "Init"),
    ("net-health-fault.txt", "net_health", "Fault"),
    ("net-health-success.txt", "net_health", "Success"),
])
def test_recorded_outputs_give_their_word(sample: str, field: str, word: str) -> None:
    assert parse_status((SAMPLES / sample).read_text(), field) == word


def test_a_word_of_two_words_and_odd_spacing_is_read_whole() -> None:
    # "Receive timeout" is a net health word (HDK A3 HCCN Tool reference, hccntool_019)
    assert parse_status("net  health status :  Receive timeout \n", "net_health") == \
        "Receive timeout"


@pytest.mark.parametrize("text", ["", "link status:\n", "dev_id:0, link down\n",
                                  "net health status: Success\n"])
def test_an_output_without_the_line_is_a_parse_error_naming_the_command(text: str) -> None:
    with pytest.raises(ParseError, match=r"hccn_tool -link -g"):
        parse_status(text, "link")


def _tool(root: FakeRoot, body: str) -> LiveHost:
    root.script(HCCN_TOOL, body)
    return LiveHost(root=str(root.path), env={"PATH": PATH})


def test_each_port_is_asked_for_its_link_and_health(fake_root: FakeRoot) -> None:
    host = _tool(fake_root, f'''case "$3" in
  -link) cat "{SAMPLES / "link-up.txt"}";;
  -net_health) [ "$2" = 1 ] && cat "{SAMPLES / "net-health-fault.txt"}" \\
               || cat "{SAMPLES / "net-health-success.txt"}";;
esac
''')
    ports = read_ports(host, range(3), timeout_s=10)
    assert [(p.device_id, p.link, p.net_health, p.unread) for p in ports] == [
        (0, "UP", "Success", None), (1, "UP", "Fault", None), (2, "UP", "Success", None)]


def test_a_missing_tool_leaves_every_port_unread_after_one_try(fake_root: FakeRoot) -> None:
    host = LiveHost(root=str(fake_root.path), env={"PATH": PATH})
    ports = read_ports(host, range(8), timeout_s=10)
    assert all(p.link is None and p.net_health is None for p in ports)
    assert "not found" in (ports[0].unread or "")
    assert ports[7].unread == ports[1].unread


def test_a_hung_tool_costs_one_timeout_not_one_per_port(fake_root: FakeRoot) -> None:
    host = _tool(fake_root, "sleep 30\n")
    ports = read_ports(host, range(8), timeout_s=0.5)
    assert "timed out" in (ports[0].unread or "")
    assert all(p.link is None for p in ports)
    assert all("timed out" in (p.unread or "") for p in ports[1:])


def test_an_error_exit_or_strange_output_leaves_that_port_unread(fake_root: FakeRoot) -> None:
    host = _tool(fake_root, '[ "$2" = 0 ] && { echo "\\033[31mboom"; exit 1; }\n'
                            'echo "something else"\n')
    first, second = read_ports(host, range(2), timeout_s=10)
    assert first.link is None and "exited with code 1" in (first.unread or "")
    assert second.link is None and "no `link status:` line" in (second.unread or "")
    assert "\033" not in (first.unread or "") + (second.unread or "")
