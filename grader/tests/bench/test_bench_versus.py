"""grader.bench.versus runs the same command with both kits: a grading of the reference, or a kill matrix."""

from __future__ import annotations

from pathlib import Path

from grader.bench import versus


def test_a_run_grades_the_kits_own_reference_with_the_options_given():
    command = versus.command(Path("/kit"), versus.parse(["--base", "main", "--problems", "P5", "--gpu", "off"]),
                             Path("/out.json"))
    assert command[1:5] == ["-P", "-m", "grader", "grade"]
    assert command[5] == "/kit/solutions" and command[-2:] == ["--problems", "P5"]
    assert command[command.index("--gpu") + 1] == "off"


def test_with_mutants_a_run_is_their_kill_matrix():
    command = versus.command(Path("/kit"), versus.parse(["--base", "main", "--mutants", "P2,P3"]), Path("/out.json"))
    assert command[1:5] == ["-P", "-m", "grader", "selfcheck"]
    assert command[command.index("--mutants") + 1] == "P2,P3" and command[command.index("--sections") + 1] == "mutants"
