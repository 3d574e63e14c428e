"""The grader command: exit codes, one-line reasons, and a results file even when grading fails."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
import torch

from grader.cli import build_parser
from grader.options import FLAGS, GradingOptions, flag, option
from grader.paths import KIT_ROOT as KIT
from grader.problems import RANGE
from grader.grading.judges import judge_environment



def grader(*args: str, cwd: Path = KIT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(KIT)}
    return subprocess.run([sys.executable, "-m", "grader", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env=env)


def test_judges_started_by_the_kit_let_idle_openmp_threads_sleep_unless_told_otherwise():
    assert judge_environment({})["OMP_WAIT_POLICY"] == "PASSIVE"
    assert judge_environment({"OMP_WAIT_POLICY": "ACTIVE"})["OMP_WAIT_POLICY"] == "ACTIVE"


def test_missing_submission_exits_2_with_one_line_and_a_results_file(tmp_path):
    out = tmp_path / "results.json"
    run = grader("grade", str(tmp_path / "nope"), "--out", str(out))
    assert run.returncode == 2
    assert run.stderr.strip().count("\n") == 0 and "no such file or folder" in run.stderr
    data = json.loads(out.read_text())
    assert data["score"] == 0 and data["tests"][0]["name"] == "Autograder failed" and "nope" in data["extra_data"]["grader_error"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_gpu_require_fails_fast_without_cuda():
    run = grader("grade", "solutions", "--gpu", "require")
    assert run.returncode == 2 and "no CUDA device" in run.stderr


BAD_GRADE_ARGUMENTS = [
    (["--jobs", "0"], "--jobs: must be at least 1"),
    (["--jobs", "-1"], "--jobs: must be at least 1"),
    (["--jobs", "two"], "--jobs: expected an integer"),
    (["--problems", "P0"], f"unknown problem(s) P0: use {RANGE}"),
    (["--problems", ","], "no problem given"),
    (["--seed", "-3"], "--seed: must be a whole number"),
    (["--seed", "1.5"], "--seed: expected an integer"),
    (["--budget-seconds", "0"], "--budget-seconds: must be more than 0"),
    (["--budget-seconds", "nan"], "--budget-seconds: expected a finite number"),
    (["--call-seconds", "-1"], "--call-seconds: must be more than 0"),
    (["--call-seconds", "60", "--budget-seconds", "30"], "--call-seconds 60 exceeds --budget-seconds 30"),
    (["--memory-mb", "10"], "--memory-mb: must be at least"),
    (["--gpu", "maybe"], "--gpu: invalid choice"),
    (["--profile", "fast"], "--profile: invalid choice"),
    (["--no-such-option"], "unrecognized arguments"),
    (["--ou", "x.json"], "unrecognized arguments"),  # no abbreviations: --ou is not --out
]


@pytest.mark.parametrize("bad, reason", BAD_GRADE_ARGUMENTS, ids=[" ".join(b) for b, _ in BAD_GRADE_ARGUMENTS])
def test_bad_grade_argument_is_refused_on_one_line_with_a_results_file(tmp_path, bad, reason):
    out = tmp_path / "deep" / "results.json"
    run = grader("grade", "solutions", "--out", str(out), *bad)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.count("\n") == 1 and reason in run.stderr, run.stderr
    data = json.loads(out.read_text())
    assert data["score"] == 0 and data["tests"][0]["name"] == "Autograder failed"


@pytest.mark.parametrize("out", ["", "DIR", "DIR/", "FILE/results.json"])
def test_unusable_out_is_refused_before_grading(tmp_path, out):
    (tmp_path / "FILE").write_text("a file, not a folder")
    (tmp_path / "DIR").mkdir()
    run = grader("grade", "solutions", "--out", out.replace("DIR", str(tmp_path / "DIR"))
                 .replace("FILE", str(tmp_path / "FILE")), "--budget-seconds", "1")
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "--out" in run.stderr, run.stderr
    assert sorted(p.name for p in (tmp_path / "DIR").iterdir()) == []


BAD_OTHER_ARGUMENTS = [
    (["batch", "x", "--out", "OUT", "--jobs", "0"], "--jobs: must be at least 1"),
    (["batch", "x", "--out", "OUT", "--shard", "3/2"], "--shard: I must be between 1 and N"),
    (["batch", "x", "--out", "OUT", "--shard", "a"], "--shard: expected I/N"),
    (["batch", "x", "--out", "OUT", "--timeout-seconds", "0"], "--timeout-seconds: must be more than 0"),
    (["batch", "x", "--out", "FILE"], "exists and is not a folder"),
    (["batch", "x"], "the following arguments are required: --out"),
    (["batch", "x", "--out", "OUT", "--only", ","], "--only: no student given"),
    (["batch", "x", "--out", "OUT", "--only", "alice,../bob"], "--only: not a student id: '../bob'"),
    (["gradebook", "NOWHERE"], "no such folder"),
    (["gradebook", "OUT", "--csv", "OUT"], "is a folder"),
    (["gradebook", "OUT", "--csv", "book.txt"], "expected a .csv file name"),
    (["gradebook", "OUT", "--roster", "roster.csv"], "--roster: no readable file roster.csv"),
    (["gradebook", "OUT", "--overrides", "OUT"], "--overrides: no readable file OUT"),
    (["show", "NOWHERE", "alice"], "no such folder"),
    (["show", "OUT"], "the following arguments are required: student"),
    (["gradescope-bundle", "OUT"], "is a folder"),
    (["gradescope-bundle", "bundle.tar"], "the bundle is a .zip file"),
    (["gradescope-bundle", "missing/b.zip"], "b.zip: no folder missing (make it first)"),
    (["gradescope-bundle", "b.zip", "--torch", "notatorch"], "--torch 'notatorch': expected what pip installs for torch"),
    (["gradescope-bundle", "b.zip", "--torch", "torch=2"], "--torch 'torch=2': expected what pip installs for torch"),
    (["gradescope-bundle", "b.zip", "--torch-index-url", "file:///x"], "--torch-index-url 'file:///x': expected an http"),
    (["release", "FILE"], "FILE exists and is not a folder"),
    (["selfcheck", "--jobs", "0"], "--jobs: must be at least 1"),
    (["selfcheck", "--sections", "everything"], "unknown section(s) everything"),
    (["selfcheck", "--out", "kept"], "--out keeps the GPU acceptance's table and gradings: use it with --gpu"),
    (["no-such-command"], "invalid choice"),
    ([], "the following arguments are required: COMMAND"),
]


@pytest.mark.parametrize("argv, reason", BAD_OTHER_ARGUMENTS, ids=[" ".join(a) for a, _ in BAD_OTHER_ARGUMENTS])
def test_bad_argument_of_every_command_is_refused_on_one_line(tmp_path, argv, reason):
    (tmp_path / "OUT").mkdir()
    (tmp_path / "FILE").write_text("x")
    run = grader(*argv, cwd=tmp_path)
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and reason in run.stderr, run.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["FILE", "OUT"] and not any((tmp_path / "OUT").iterdir())


def test_cli_defaults_are_the_python_defaults():
    from grader.grading import grade

    for command in (["grade", "x"], ["batch", "x", "--out", "o"]):
        args = build_parser().parse_args(command)
        assert GradingOptions.from_args(args) == GradingOptions(), command
    args = build_parser().parse_args(["grade", "x"])
    for name, default in grade.main.__kwdefaults__.items():
        if hasattr(args, name):
            assert getattr(args, name) == default, name


def _grading_flags(command: str) -> dict[str, argparse.Action]:
    """The grading options ``command``'s parser sets, by field name."""
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    return {a.dest: a for a in commands[command]._actions if a.dest in {f.name for f in fields(GradingOptions)}}


def test_each_grading_flag_comes_from_its_fields_option():
    """grade sets every grading option a command line sets, batch all but --in-process, gradescope-bundle the
    bundle's settings: each flag, help and default is its field's (the bundle's help and defaults its own)."""
    assert set(_grading_flags("grade")) == set(FLAGS) and set(_grading_flags("batch")) == set(FLAGS) - {"in_process"}
    for name, action in _grading_flags("grade").items():
        assert action.option_strings == [flag(name)] and action.help == option(name).help, name
        assert action.default == getattr(GradingOptions(), name) and action.choices == (option(name).choices or None)
    from grader.classroom import bundle

    for name, action in _grading_flags("gradescope-bundle").items():
        assert action.default == getattr(bundle.GRADESCOPE, name) and action.help == bundle.SETTINGS[name]["help"]
    assert set(_grading_flags("gradescope-bundle")) == set(bundle.SETTINGS)


@pytest.mark.parametrize("options", [GradingOptions(), GradingOptions(
    gpu="off", seed=7, problems=("P3", "P1"), profile="ci", budget_seconds=60.5, call_seconds=5.0, memory_mb=512,
    not_run="zero", in_process=True)])
def test_the_grade_command_line_options_write_is_the_one_it_reads(options):
    """batch and the attack check run ``grader grade`` with ``to_argv``: the CLI reads back the very same options."""
    args = build_parser().parse_args(["grade", "x", *options.to_argv()])
    assert GradingOptions.from_args(args) == options
