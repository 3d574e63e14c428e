"""The grader command: exit codes, one-line reasons, and a results file even when grading fails."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from grader.cli import build_parser

KIT = Path(__file__).resolve().parents[2]


def grader(*args: str, cwd: Path = KIT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600)


def test_missing_submission_exits_2_with_one_line_and_a_results_file(tmp_path):
    out = tmp_path / "results.json"
    run = grader("grade", str(tmp_path / "nope"), "--out", str(out))
    assert run.returncode == 2
    assert run.stderr.strip().count("\n") == 0 and "no such file or folder" in run.stderr
    data = json.loads(out.read_text())
    assert data["score"] == 0 and data["tests"][0]["name"] == "Autograder failed" and "nope" in data["grader_error"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_gpu_require_fails_fast_without_cuda():
    run = grader("grade", "solutions", "--gpu", "require")
    assert run.returncode == 2 and "no CUDA device" in run.stderr


def test_bad_arguments_are_usage_errors():
    run = grader("grade", "solutions", "--problems", "P9")
    assert run.returncode == 2 and "P1..P8" in run.stderr


def test_cli_defaults_are_the_python_defaults():
    from grader import grade

    args = build_parser().parse_args(["grade", "x"])
    for name, default in grade.main.__kwdefaults__.items():
        if hasattr(args, name):
            assert getattr(args, name) == default, name
