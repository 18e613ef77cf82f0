"""probes.target.devices: a container's /dev/davinci<N> nodes (real files under a fake root) and
the npu-smi rows its ASCEND_RT_VISIBLE_DEVICES names."""

from __future__ import annotations

from pathlib import Path

from conftest import FakeRoot

from probes.live import LiveHost
from probes.target.devices import UNMAPPED, container_rows, davinci_nodes


def root_with(tmp_path: Path, nodes: tuple[int, ...]) -> LiveHost:
    root = FakeRoot(tmp_path / "root")
    root.dir("/dev")
    for n in nodes:
        root.file(f"/dev/davinci{n}")
    for name in ("davinci_manager", "devmm_svm", "hisi_hdc"):  # not devices of one chip
        root.file(f"/dev/{name}")
    return LiveHost(root=str(root.path), env={})


def test_nodes_are_the_numbered_davinci_files_ascending(tmp_path: Path) -> None:
    assert davinci_nodes(root_with(tmp_path, (7, 4, 12))) == (4, 7, 12)
    assert davinci_nodes(LiveHost(root=str(tmp_path / "nowhere"), env={})) is None


def test_container_index_i_is_its_ith_node_found_by_phy_id(tmp_path: Path) -> None:
    """Host NPUs 3..7 given to the container are 0..4 inside; index 2 is physical id 5."""
    host = root_with(tmp_path, (3, 4, 5, 6, 7))
    phy_ids = [0, 1, 2, 3, 4, 5, 6, 7]
    rows, how = container_rows(host, (2,), "2", phy_ids)
    assert rows == (5,) and "container device i is its i-th node" in how
    rows, _ = container_rows(host, (4, 0, 9), "4,0,9", phy_ids)
    assert rows == (7, 3)  # in the order written; 9 is past the container's five devices
    rows, _ = container_rows(host, None, None, list(reversed(phy_ids)))
    assert rows == (4, 3, 2, 1, 0)  # the rows whose Phy-ID are 3..7


def test_without_phy_ids_only_a_container_with_every_device_is_mapped(tmp_path: Path) -> None:
    rows, how = container_rows(root_with(tmp_path / "all", tuple(range(4))), (1, 3), "1,3",
                               [None] * 4)
    assert rows == (1, 3) and "sees every device of the host" in how
    rows, how = container_rows(root_with(tmp_path / "some", (4, 7)), (0,), "0", [None] * 8)
    assert rows is None and how.endswith(UNMAPPED) and "/dev/davinci4, /dev/davinci7" in how
    rows, how = container_rows(root_with(tmp_path / "unset", (4, 7)), None, None, [None] * 8)
    assert rows is None and how.startswith("inside a container that sees /dev/davinci4")
