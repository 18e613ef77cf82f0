"""`make demo` installs the project with setuptools: its metadata reads without the deprecation
warnings that fill a newcomer's first screen (and that setuptools says become errors)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_the_metadata_reads_without_a_license_warning() -> None:
    setuptools = pytest.importorskip("setuptools")
    from setuptools.config.pyprojecttoml import apply_configuration

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dist = apply_configuration(setuptools.Distribution(), ROOT / "pyproject.toml")
    said = [str(w.message) for w in caught if "license" in str(w.message).lower()]
    assert not said, said
    assert dist.metadata.license_expression == "Apache-2.0"


def test_the_build_asks_for_a_setuptools_that_reads_a_license_expression() -> None:
    # a license string (PEP 639) needs setuptools 77 or later
    build_system = (ROOT / "pyproject.toml").read_text().split("[project]")[0]
    assert 'requires = ["setuptools>=77", "wheel"]' in build_system
