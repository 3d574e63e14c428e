"""grader.bench.alternate runs two commands in turn and prints each run, both medians and their ratio."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from grader.bench.alternate import Command, alternate


def _command(code: str, tmp_path: Path) -> Command:
    return Command([sys.executable, "-c", code], tmp_path, dict(os.environ))


def test_two_commands_run_in_turn_and_their_medians_are_compared(tmp_path, capsys):
    log = tmp_path / "order"
    runs = alternate({name: _command(f"open({str(log)!r}, 'a').write({mark!r})", tmp_path)
                      for name, mark in (("first", "1"), ("second", "2"))}, 2)
    assert log.read_text() == "1212"
    assert {name: len(rounds) for name, rounds in runs.items()} == {"first": 2, "second": 2}
    out = capsys.readouterr().out
    assert "round 2: second" in out
    medians = [line for line in out.splitlines() if line.startswith("median:")]
    pattern = r"median: first [0-9.]+ {0}, second [0-9.]+ {0}, ratio [0-9.]+x"
    assert len(medians) == 2
    assert re.fullmatch(pattern.format("s"), medians[0]) and re.fullmatch(pattern.format("CPU-s"), medians[1])


def test_a_failing_command_stops_with_its_name_and_error(tmp_path):
    with pytest.raises(SystemExit, match="the run of broken failed .exit 3.: no way"):
        alternate({"fine": _command("pass", tmp_path),
                   "broken": _command("import sys; sys.stderr.write('no way'); sys.exit(3)", tmp_path)}, 1)
