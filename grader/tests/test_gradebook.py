"""grader gradebook: an exact, order-independent merge; conflicting duplicates refused; what is
missing reported; the summary and histogram beside the CSV. Results are made here, no grading."""

from __future__ import annotations

import csv
import itertools
from pathlib import Path

import pytest

from grader import gradebook
from grader.cli import build_parser
from grader.problems import PROBLEMS
from grader.results import GradingResult, write_json_atomic
from grader.results import TestResult as Outcome


def outcomes(p1: int = 12, p3: tuple[str, ...] = ("passed", "passed")) -> tuple[Outcome, ...]:
    """P1: one test worth p1 points passed (12 total); P3: two 6-point tests with the given statuses."""
    made = [Outcome("P1", "memory", "sizes", 12.0, "passed" if p1 == 12 else "failed")]
    made += [Outcome("P3", "einsum", f"rewrite {i}", 6.0, status) for i, status in enumerate(p3)]
    made += [Outcome("P8", "amp", "speed on a GPU", 2.0, "not_run", gpu=True)]
    return tuple(made)


def write(folder: Path, student: str, result: GradingResult, *, digest: str = "",
          graded_at: str = "2026-01-01T10:00:00+00:00", status: str | None = None) -> Path:
    data = result.to_gradescope_dict()
    data["extra_data"]["batch"] = {"student": student, "content_hash": digest or f"sha256:{student:0<64}",
                     "status": status or ("error" if result.error else "graded"), "graded_at": graded_at,
                                   "options": {}}
    path = folder / "results" / f"{student}.json"
    write_json_atomic(path, data)
    return path


def manifest(folder: Path, students: list[str], shard: str | None = None) -> None:
    write_json_atomic(folder / "batch.json", {"students": students, "shard": shard})


def table(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as stream:
        return list(csv.DictReader(stream))


def test_rows_are_exact_and_sorted(tmp_path):
    write(tmp_path / "run", "zoe", GradingResult(tests=outcomes(p3=("passed", "failed"))))
    write(tmp_path / "run", "adam", GradingResult(tests=(Outcome("P2", "strides", "a", 11.5, "passed"),
                                                         Outcome("P2", "strides", "b", 2.5, "failed"))))
    write(tmp_path / "run", "mia", GradingResult.failed("mia.zip", "not a readable zip file"))
    out = tmp_path / "gb" / "gradebook.csv"
    assert gradebook.main([str(tmp_path / "run")], csv=out) == 0
    assert out.read_text().splitlines()[0] == ",".join(gradebook.COLUMNS)
    rows = table(out)
    assert [r["student"] for r in rows] == ["adam", "mia", "zoe"]
    assert rows[0]["total"] == "11.5" and rows[0]["P2"] == "11.5" and rows[0]["P1"] == ""
    assert rows[0]["provisional"] == "false"
    assert rows[2]["total"] == "18" and rows[2]["P1"] == "12" and rows[2]["P3"] == "6" and rows[2]["P8"] == "0"
    assert rows[2]["provisional"] == "true" and rows[2]["graded_at"] == "2026-01-01T10:00:00+00:00"
    assert rows[1]["status"] == "error" and rows[1]["total"] == "" and all(rows[1][k] == "" for k in PROBLEMS)


def test_merge_is_order_independent(tmp_path):
    folders = [tmp_path / name for name in ("a", "b", "c")]
    for i, folder in enumerate(folders):
        for j in range(4):
            graded = GradingResult(tests=outcomes(p1=12 if j % 2 else 0, p3=("passed", "failed")[: j % 3]))
            write(folder, f"s{i}{j}", graded)
        manifest(folder, [f"s{i}{j}" for j in range(4)], shard=f"{i + 1}/3")
    outputs = set()
    for n, order in enumerate(itertools.permutations(folders)):
        out = tmp_path / f"out{n}" / "gradebook.csv"
        assert gradebook.main([str(f) for f in order], csv=out) == 0
        outputs.add((out.read_bytes(), out.with_suffix(".md").read_bytes()))
    assert len(outputs) == 1 and len(table(tmp_path / "out0" / "gradebook.csv")) == 12


def test_identical_duplicates_merge_and_keep_the_earliest_time(tmp_path):
    result = GradingResult(tests=outcomes())
    write(tmp_path / "run1", "alice", result, digest="sha256:aa", graded_at="2026-01-02T00:00:00+00:00")
    write(tmp_path / "run2", "alice", result, digest="sha256:aa", graded_at="2026-01-01T00:00:00+00:00")
    out = tmp_path / "gradebook.csv"
    assert gradebook.main([str(tmp_path / "run1"), str(tmp_path / "run2")], csv=out) == 0
    assert [(r["student"], r["graded_at"]) for r in table(out)] == [("alice", "2026-01-01T00:00:00+00:00")]


@pytest.mark.parametrize("change", ["score", "content"])
def test_conflicting_duplicates_are_refused_naming_both_files(tmp_path, capsys, change):
    first = write(tmp_path / "run1", "alice", GradingResult(tests=outcomes()), digest="sha256:aa")
    second = write(tmp_path / "run2", "alice", GradingResult(tests=outcomes(p1=0) if change == "score" else outcomes()),
                   digest="sha256:aa" if change == "score" else "sha256:bb")
    write(tmp_path / "run2", "bob", GradingResult(tests=outcomes()))
    out = tmp_path / "gradebook.csv"
    assert gradebook.main([str(tmp_path / "run1"), str(tmp_path / "run2")], csv=out) == 2
    err = capsys.readouterr().err
    assert "conflicting results" in err and "alice" in err and str(first) in err and str(second) in err
    assert "bob" not in err and not out.exists()


def test_missing_students_and_shards_are_reported(tmp_path, capsys):
    write(tmp_path / "shard1", "alice", GradingResult(tests=outcomes()))
    manifest(tmp_path / "shard1", ["alice", "bob"], shard="1/3")
    write(tmp_path / "shard2", "carol", GradingResult(tests=outcomes()))
    manifest(tmp_path / "shard2", ["carol"], shard="2/3")
    out = tmp_path / "gradebook.csv"
    assert gradebook.main([str(tmp_path / "shard1"), str(tmp_path / "shard2")], csv=out) == 1
    assert [(r["student"], r["status"], r["total"]) for r in table(out)] == [
        ("alice", "graded", "24"), ("bob", "missing", ""), ("carol", "graded", "24")]
    summary = out.with_suffix(".md").read_text()
    assert "bob: listed by its batch, no result" in summary and "shard 3/3: no batch.json" in summary
    assert "1 students without a result" in capsys.readouterr().err


def test_a_downloaded_ci_artifact_folder_is_read_whole(tmp_path):
    for index in (1, 2):
        shard = tmp_path / "shards" / f"results-shard-{index}"
        write(shard, f"student{index}", GradingResult(tests=outcomes()))
        manifest(shard, [f"student{index}"], shard=f"{index}/2")
    out = tmp_path / "gradebook" / "gradebook.csv"
    assert gradebook.main([str(tmp_path / "shards")], csv=out) == 0
    assert [r["student"] for r in table(out)] == ["student1", "student2"]


def test_plain_results_files_from_grader_grade_are_accepted(tmp_path):
    write_json_atomic(tmp_path / "alice.json", GradingResult(tests=outcomes()).to_gradescope_dict())
    out = tmp_path / "out" / "gradebook.csv"
    assert gradebook.main([str(tmp_path)], csv=out) == 0
    assert [(r["student"], r["total"], r["status"]) for r in table(out)] == [("alice", "24", "graded")]


def test_unreadable_results_are_refused(tmp_path, capsys):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "alice.json").write_text("{half")
    assert gradebook.main([str(tmp_path)], csv=tmp_path / "gradebook.csv") == 2
    assert "alice.json: not a results file" in capsys.readouterr().err
    assert gradebook.main([str(tmp_path / "nope")], csv=tmp_path / "gradebook.csv") == 2


def test_summary_and_histogram(tmp_path):
    write(tmp_path, "a", GradingResult(tests=outcomes(p3=("passed", "failed"))))
    write(tmp_path, "b", GradingResult(tests=outcomes(p1=0, p3=("failed", "failed"))))
    write(tmp_path, "c", GradingResult(tests=outcomes()))
    write(tmp_path, "d", GradingResult.failed("d", "the grader exited with code 1 | traceback"))
    out = tmp_path / "gradebook.csv"
    assert gradebook.main([str(tmp_path)], csv=out) == 0
    summary = out.with_suffix(".md").read_text()
    assert "4 students: 3 graded, 1 errors, 0 missing; 3 provisional" in summary
    assert "| P1 memory | 3 | 8.00 | 12 | 66.7 |" in summary and "| P3 einsum | 3 | 6.00 | 12 | 50.0 |" in summary
    assert "| P3 rewrite 1 | 1 | 2 | 0 | 33.3% |" in summary and "| P8 speed on a GPU | 0 | 0 | 3 | - |" in summary
    assert summary.index("1. P3 rewrite 1: failed by 2 of 3") < summary.index("2. P1 sizes: failed by 1 of 3")
    assert "| d | the grader exited with code 1 \\| traceback |" in summary
    png = out.with_suffix(".png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_cli_defaults_are_the_python_defaults(tmp_path):
    args = build_parser().parse_args(["gradebook", str(tmp_path), str(tmp_path)])
    assert args.folders == [tmp_path, tmp_path] and args.csv == gradebook.main.__kwdefaults__["csv"]
