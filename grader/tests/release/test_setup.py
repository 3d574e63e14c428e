"""The release's set-up: one uv command and one pip command per OS, from one pyproject.toml.

uv: the release's ``pyproject.toml`` sends torch to PyTorch's CPU index on Linux only (an explicit
index, asked for torch alone) and resolves against PyPI for macOS (Apple silicon) and Windows
(``uv pip compile --python-platform``; skipped without uv or without network). PyTorch's own
index is not asked here: the Linux resolution is checked by its configuration.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the kit runs on 3.11+, tomli ships with pytest's dependencies on 3.10
    import tomli as tomllib

PROJECT = Path(__file__).resolve().parents[3] / "grader" / "release" / "templates" / "pyproject.toml"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
NETWORK_TROUBLE = ("dns error", "Failed to fetch", "error sending request", "Could not connect", "timed out")


def test_torch_comes_from_the_cpu_index_on_linux_only_and_nothing_else_does():
    uv = tomllib.loads(PROJECT.read_text(encoding="utf-8"))["tool"]["uv"]
    assert uv["sources"] == {"torch": [{"index": "pytorch-cpu", "marker": "sys_platform == 'linux'"}]}
    assert uv["index"] == [{"name": "pytorch-cpu", "url": CPU_INDEX, "explicit": True}]


@pytest.mark.parametrize("platform", ["aarch64-apple-darwin", "x86_64-pc-windows-msvc"])
def test_the_release_resolves_with_uv_for_macos_and_windows(platform, tmp_path):
    uv = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))
    if uv is None:
        pytest.skip("uv is not installed (pip install uv; the dev extra has it)")
    shutil.copyfile(PROJECT, tmp_path / "pyproject.toml")
    run = subprocess.run([uv, "pip", "compile", "pyproject.toml", "--python-platform", platform,
                          "--python-version", "3.11", "--quiet", "--no-header"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "MACOSX_DEPLOYMENT_TARGET": "14.0"})  # torch 2.13 needs macOS 14
    if run.returncode and any(words in run.stderr for words in NETWORK_TROUBLE):
        pytest.skip(f"no network to PyPI: {run.stderr.strip().splitlines()[-1]}")
    assert run.returncode == 0, run.stderr
    pins = dict(re.findall(r"^([a-z]+)==(\S+)$", run.stdout, flags=re.MULTILINE))
    assert {"torch", "einops", "numpy", "pytest", "hypothesis", "jaxtyping"} <= pins.keys(), run.stdout
    assert (2, 6) <= tuple(map(int, pins["torch"].split(".")[:2])) <= (2, 13), pins["torch"]
