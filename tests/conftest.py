"""Shared fixtures: the corpus and a small fake machine root."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
CORPUS_DIR = TESTS_DIR / "corpus"


@pytest.fixture
def corpus_dir() -> Path:
    """The npu-smi output corpus (real outputs, one per file)."""
    return CORPUS_DIR / "npu-smi"


class FakeRoot:
    """A directory standing for a machine's `/`; write files by their absolute paths."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def file(self, abs_path: str, content: str | bytes = "", mode: int | None = None) -> Path:
        target = self.path / abs_path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode() if isinstance(content, str) else content
        target.write_bytes(data)
        if mode is not None:
            target.chmod(mode)
        return target

    def dir(self, abs_path: str) -> Path:
        target = self.path / abs_path.lstrip("/")
        target.mkdir(parents=True, exist_ok=True)
        return target

    def link(self, abs_path: str, target: str) -> Path:
        """A symlink at `abs_path` whose target is written verbatim (relative or absolute)."""
        where = self.path / abs_path.lstrip("/")
        where.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, where)
        return where

    def script(self, abs_path: str, body: str) -> Path:
        """An executable /bin/sh script."""
        return self.file(abs_path, "#!/bin/sh\n" + body, mode=0o755)


@pytest.fixture
def fake_root(tmp_path: Path) -> FakeRoot:
    """An empty fake machine root; use with LiveHost(root=str(fake_root.path))."""
    root = tmp_path / "root"
    root.mkdir()
    return FakeRoot(root)
