"""grader.bench.versus runs the same command with both kits: a grading of the reference, or a kill matrix."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.bench import versus


def test_a_run_grades_the_kits_own_reference_with_the_options_given():
    command = versus.command(Path("/kit"), versus.parse(["--base", "main", "--problems", "P5", "--gpu", "off"]),
                             Path("/out.json"))
    assert command[1:5] == ["-P", "-m", "grader", "grade"]
    assert command[5] == "/kit/solutions" and command[-2:] == ["--problems", "P5"]
    assert command[command.index("--gpu") + 1] == "off" and command[command.index("--jobs") + 1] == "1"


def test_jobs_reach_the_grading_and_must_be_positive(capsys):
    command = versus.command(Path("/kit"), versus.parse(["--base", "main", "--jobs", "2"]), Path("/out.json"))
    assert command[command.index("--jobs") + 1] == "2"
    with pytest.raises(SystemExit) as exited:
        versus.parse(["--base", "main", "--jobs", "0"])
    assert exited.value.code == 2 and "--jobs must be at least 1" in capsys.readouterr().err


def test_with_mutants_a_run_is_their_kill_matrix():
    command = versus.command(Path("/kit"), versus.parse(["--base", "main", "--mutants", "P2,P3"]), Path("/out.json"))
    assert command[1:5] == ["-P", "-m", "grader", "selfcheck"]
    assert command[command.index("--mutants") + 1] == "P2,P3" and command[command.index("--sections") + 1] == "mutants"
