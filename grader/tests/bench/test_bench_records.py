"""Bench records: a run writes one checked record; ``docs/benchmarks.md`` renders from records (here, the
fixture records): the latest figures per claim with their command, every record in the history."""

from __future__ import annotations

import ast
import json
import os
import shutil

import pytest

from grader.bench import records, render
from grader.paths import KIT_ROOT

FIXTURES = KIT_ROOT / "grader" / "tests" / "fixtures" / "bench_records"
BENCH = KIT_ROOT / "grader" / "bench"


def test_a_run_writes_one_record_with_where_and_when_it_ran(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KIT_BENCH_RECORDS", str(tmp_path))
    monkeypatch.setattr(os, "getloadavg", lambda: (3.14159, 2.0, 1.0))
    run = records.start("versus", ["--base", "main"])
    path = run.write("a claim", {"CPU ratio": 0.9}, sides={"main": {"CPU-s": 40.0}, "this kit": {"CPU-s": 36.0}})
    record = json.loads(path.read_text())
    assert path.parent == tmp_path and f"record: {path}" in capsys.readouterr().out
    assert record["command"] == "python -m grader.bench.versus --base main" and record["claim"] == "a claim"
    assert record["load_at_start"] == 3.14
    assert record["cpu"]["count"] == os.cpu_count() and record["cpu"]["model"]
    assert record["commit"] and record["date"].endswith("Z") and record["sides"]["main"] == {"CPU-s": 40.0}
    assert records.load(tmp_path) == [record]
    assert run.write("a claim", {"CPU ratio": 0.8}) != path  # a second record of the same second: a new name


@pytest.mark.parametrize(("edit", "reason"), [
    (lambda r: r.pop("claim"), "'claim' missing"), (lambda r: r.update(version=9), "version 9"),
    (lambda r: r.update(figures=[1]), "'figures' missing or not dict"),
    (lambda r: r.update(imported=None, load_at_start=None), "'load_at_start' missing or not a number")])
def test_a_bad_record_is_refused_with_its_reason(tmp_path, edit, reason, capsys):
    record = json.loads((FIXTURES / "20261020T080000Z-ci.json").read_text())
    edit(record)
    (tmp_path / "bad.json").write_text(json.dumps(record))
    assert render.main(["--records", str(tmp_path), "--out", str(tmp_path / "page.md")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("render: bad.json: ") and reason in error and "\n" not in error


def test_render_needs_a_records_folder(tmp_path, capsys):
    assert render.main(["--records", str(tmp_path / "none"), "--out", str(tmp_path / "page.md")]) == 2
    assert "no such folder" in capsys.readouterr().err


def test_the_page_shows_the_latest_figures_per_claim_and_the_whole_history(tmp_path):
    assert render.main(["--records", str(FIXTURES), "--out", str(tmp_path / "page.md")]) == 0
    page = (tmp_path / "page.md").read_text()
    latest, history = page.split("## History")
    assert latest.count("### ") == 2  # two claims
    assert "    python -m grader.bench.versus --base older --rounds 2" in latest and "--base old " not in latest
    assert "CPU ratio 0.82; wall ratio 0.89." in latest and "| older | 28 | 40.8 | 2 |" in latest
    assert "imported from README.md at 3333333" in latest and "load 1.25 at the start" in latest
    rows = [line for line in history.splitlines() if line.startswith("| 2026")]
    assert [row.split(" | ")[0] for row in rows] == ["| 2026-11-02T10:00:00Z", "| 2026-11-01T10:00:00Z",
                                                     "| 2026-10-20T08:00:00Z"]
    assert "(imported)" in rows[2] and "(imported)" not in rows[0]


def test_the_kits_benchmarks_page_is_rendered_from_its_records():
    page = (KIT_ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert page == render.render(records.load(records.RECORDS)), "run: python -m grader.bench.render"


def test_every_bench_writes_a_record():
    benches = {path.stem for path in BENCH.glob("*.py") if any(
        isinstance(node, ast.FunctionDef) and node.name == "main" for node in ast.parse(path.read_text()).body)}
    silent = {name for name in benches - {"records", "render"}
              if "records.start(" not in (BENCH / f"{name}.py").read_text()}
    assert benches and not silent
    assert "grader.bench.records" in (BENCH / "gpu_runner.sh").read_text()


def test_a_script_writes_its_record_from_the_command_line(tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_BENCH_RECORDS", str(tmp_path))
    assert records.main(["--bench", "gpu_runner", "--claim", "c", "--load", "0.5", "acceptance=exit 0, 128 s",
                         "steps=6", "share=0.5"]) == 0
    (record,) = records.load(tmp_path)
    assert record["figures"] == {"acceptance": "exit 0, 128 s", "steps": 6, "share": 0.5}
    assert record["command"] == "gpu_runner" and record["load_at_start"] == 0.5
    with pytest.raises(SystemExit):
        records.main(["--bench", "b", "--claim", "c", "--load", "0", "no-equals-sign"])


def test_records_are_sorted_by_date_whatever_their_names(tmp_path):
    shutil.copy(FIXTURES / "20261101T100000Z-versus.json", tmp_path / "a.json")
    shutil.copy(FIXTURES / "20261020T080000Z-ci.json", tmp_path / "b.json")
    assert [record["bench"] for record in records.load(tmp_path)] == ["ci", "versus"]
