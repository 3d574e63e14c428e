"""grader gradebook: an exact, order-independent merge; conflicting duplicates refused; what is
missing reported; the summary and histogram beside the CSV. Results are made here, no grading."""

from __future__ import annotations

import csv
import itertools
import os
import statistics
from pathlib import Path

import pytest

from grader.classroom import gradebook
from grader.classroom.gradebook import plots
from grader.cli import build_parser
from grader.problems import PROBLEMS, TOTAL_POINTS
from grader.grading.results import GradingResult, TestResult, write_json_atomic


def sample_results(p1: int = 12, p3: tuple[str, ...] = ("passed", "passed")) -> tuple[TestResult, ...]:
    """P1: one test worth p1 points passed (12 total); P3: two 6-point tests with the given statuses."""
    made = [TestResult("P1", "memory", "sizes", 12.0, "passed" if p1 == 12 else "failed")]
    made += [TestResult("P3", "einsum", f"rewrite {i}", 6.0, status) for i, status in enumerate(p3)]
    made += [TestResult("P8", "amp", "speed on a GPU", 2.0, "not_run", gpu=True)]
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
    """The students' rows (the max-points row, always first, checked and left out)."""
    with open(path, newline="") as stream:
        rows = list(csv.DictReader(stream))
    assert rows[0]["student"] == "max points" and rows[0]["status"] == "max"
    return rows[1:]


def test_rows_are_exact_and_sorted(tmp_path):
    write(tmp_path / "run", "zoe", GradingResult(tests=sample_results(p3=("passed", "failed")),
                                                 isolation={"mechanism": "bubblewrap + seccomp + cgroup v2"}))
    write(tmp_path / "run", "adam", GradingResult(tests=(TestResult("P2", "strides", "a", 11.5, "passed"),
                                                         TestResult("P2", "strides", "b", 2.5, "failed"))))
    write(tmp_path / "run", "mia", GradingResult.failed("mia.zip", "not a readable zip file"))
    out = tmp_path / "gb" / "gradebook.csv"
    assert gradebook.main([str(tmp_path / "run")], csv=out) == 0
    assert out.read_text().splitlines()[0] == ",".join(gradebook.COLUMNS)
    maximum = next(csv.DictReader(out.open()))
    assert maximum["total"] == str(TOTAL_POINTS) == str(sum(int(maximum[k]) for k in PROBLEMS))
    assert [int(maximum[k]) for k in PROBLEMS] == [p.points for p in PROBLEMS.values()]
    rows = table(out)
    assert [r["student"] for r in rows] == ["adam", "mia", "zoe"]
    assert rows[0]["total"] == "11.5" and rows[0]["P2"] == "11.5" and rows[0]["P1"] == ""
    assert rows[0]["provisional"] == "false"
    assert rows[2]["total"] == "18" and rows[2]["P1"] == "12" and rows[2]["P3"] == "6" and rows[2]["P8"] == "0"
    assert rows[2]["provisional"] == "true" and rows[2]["graded_at"] == "2026-01-01T10:00:00+00:00"
    assert rows[1]["status"] == "error" and rows[1]["total"] == "0" and all(rows[1][k] == "" for k in PROBLEMS)
    assert rows[1]["notes"] == "not a readable zip file" and rows[0]["notes"] == rows[2]["notes"] == ""
    assert rows[2]["isolation"] == "bubblewrap + seccomp + cgroup v2" and rows[0]["isolation"] == ""


def test_merge_is_order_independent(tmp_path):
    folders = [tmp_path / name for name in ("a", "b", "c")]
    for i, folder in enumerate(folders):
        for j in range(4):
            graded = GradingResult(tests=sample_results(p1=12 if j % 2 else 0, p3=("passed", "failed")[: j % 3]))
            write(folder, f"s{i}{j}", graded)
        manifest(folder, [f"s{i}{j}" for j in range(4)], shard=f"{i + 1}/3")
    outputs = set()
    for n, order in enumerate(itertools.permutations(folders)):
        out = tmp_path / f"out{n}" / "gradebook.csv"
        assert gradebook.main([str(f) for f in order], csv=out) == 0
        outputs.add((out.read_bytes(), out.with_suffix(".md").read_bytes()))
    assert len(outputs) == 1 and len(table(tmp_path / "out0" / "gradebook.csv")) == 12


def test_identical_duplicates_merge_and_keep_the_earliest_time(tmp_path):
    result = GradingResult(tests=sample_results())
    write(tmp_path / "run1", "alice", result, digest="sha256:aa", graded_at="2026-01-02T00:00:00+00:00")
    write(tmp_path / "run2", "alice", result, digest="sha256:aa", graded_at="2026-01-01T00:00:00+00:00")
    out = tmp_path / "gradebook.csv"
    assert gradebook.main([str(tmp_path / "run1"), str(tmp_path / "run2")], csv=out) == 0
    assert [(r["student"], r["graded_at"]) for r in table(out)] == [("alice", "2026-01-01T00:00:00+00:00")]


@pytest.mark.parametrize("change", ["score", "content"])
def test_conflicting_duplicates_are_refused_naming_both_files(tmp_path, capsys, change):
    first = write(tmp_path / "run1", "alice", GradingResult(tests=sample_results()), digest="sha256:aa")
    second = write(tmp_path / "run2", "alice", GradingResult(tests=sample_results(p1=0) if change == "score" else sample_results()),
                   digest="sha256:aa" if change == "score" else "sha256:bb")
    write(tmp_path / "run2", "bob", GradingResult(tests=sample_results()))
    out = tmp_path / "gradebook.csv"
    assert gradebook.main([str(tmp_path / "run1"), str(tmp_path / "run2")], csv=out) == 2
    err = capsys.readouterr().err
    assert "conflicting results" in err and "alice" in err and str(first) in err and str(second) in err
    assert "bob" not in err and not out.exists()


def test_missing_students_and_shards_are_reported(tmp_path, capsys):
    write(tmp_path / "shard1", "alice", GradingResult(tests=sample_results()))
    manifest(tmp_path / "shard1", ["alice", "bob"], shard="1/3")
    write(tmp_path / "shard2", "carol", GradingResult(tests=sample_results()))
    manifest(tmp_path / "shard2", ["carol"], shard="2/3")
    out = tmp_path / "gradebook.csv"
    assert gradebook.main([str(tmp_path / "shard1"), str(tmp_path / "shard2")], csv=out) == 1
    assert [(r["student"], r["status"], r["total"]) for r in table(out)] == [
        ("alice", "graded", "24"), ("bob", "missing", "0"), ("carol", "graded", "24")]
    summary = out.with_suffix(".md").read_text()
    assert "bob: listed by its batch, no result" in summary and "shard 3/3: no batch.json" in summary
    assert "1 students without a result" in capsys.readouterr().err


def test_a_downloaded_ci_artifact_folder_is_read_whole(tmp_path):
    for index in (1, 2):
        shard = tmp_path / "shards" / f"results-shard-{index}"
        write(shard, f"student{index}", GradingResult(tests=sample_results()))
        manifest(shard, [f"student{index}"], shard=f"{index}/2")
    out = tmp_path / "gradebook" / "gradebook.csv"
    assert gradebook.main([str(tmp_path / "shards")], csv=out) == 0
    assert [r["student"] for r in table(out)] == ["student1", "student2"]


def test_plain_results_files_from_grader_grade_are_accepted(tmp_path):
    write_json_atomic(tmp_path / "alice.json", GradingResult(tests=sample_results()).to_gradescope_dict())
    out = tmp_path / "out" / "gradebook.csv"
    assert gradebook.main([str(tmp_path)], csv=out) == 0
    assert [(r["student"], r["total"], r["status"]) for r in table(out)] == [("alice", "24", "graded")]


def test_unreadable_results_are_refused(tmp_path, capsys):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "alice.json").write_text("{half")
    assert gradebook.main([str(tmp_path)], csv=tmp_path / "gradebook.csv") == 2
    assert "alice.json: not a results file" in capsys.readouterr().err
    assert gradebook.main([str(tmp_path / "nope")], csv=tmp_path / "gradebook.csv") == 2


def test_summary_and_figures(tmp_path):
    write(tmp_path, "a", GradingResult(tests=sample_results(p3=("passed", "failed"))))
    write(tmp_path, "b", GradingResult(tests=sample_results(p1=0, p3=("failed", "failed"))))
    write(tmp_path, "c", GradingResult(tests=sample_results()))
    write(tmp_path, "d", GradingResult.failed("d", "the grader exited with code 1 | traceback"))
    write(tmp_path, "e", GradingResult(tests=sample_results(p3=("passed", "error"))), status="graded")  # a test not judged
    out = tmp_path / "gradebook.csv"
    assert gradebook.main([str(tmp_path)], csv=out) == 0
    rows = {r["student"]: r for r in table(out)}
    assert [rows[s]["status"] for s in "abcde"] == ["graded"] * 3 + ["error"] * 2
    assert rows["e"]["total"] == "0" and "could not judge 1 test: P3 einsum: rewrite 1" in rows["e"]["notes"]
    summary = out.with_suffix(".md").read_text()
    assert "5 students: 3 graded, 2 errors, 0 missing; 3 provisional" in summary
    totals = [float(r["total"]) for r in rows.values() if r["status"] == "graded"]
    mean, median = statistics.fmean(totals), statistics.median(totals)
    assert f"mean {mean:.2f}, median {median:g}, min {min(totals):g}, max {max(totals):g}" in summary
    assert "| P1 memory | 3 | 8.00 | 12 | 66.7 |" in summary and "| P3 einsum | 3 | 6.00 | 12 | 50.0 |" in summary
    assert "| P3 rewrite 1 | 1 | 2 | 0 | 1 | 0 | 33.3% |" in summary and "| P8 speed on a GPU | 0 | 0 | 0 | 0 | 4 | - |" in summary
    assert summary.index("1. P3 rewrite 1: failed by 2 of 4") < summary.index("2. P1 sizes: failed by 1 of 4")
    assert "| d | the grader exited with code 1 \\| traceback |" in summary
    for name in ("gradebook.png", "gradebook-problems.png"):
        png = (tmp_path / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000

    records = gradebook.collect([tmp_path])[0]
    axes = plots.histogram(records).axes[0]
    assert [t.get_text() for t in axes.get_legend().get_texts()] == [f"mean {mean:.1f}", f"median {median:g}"]
    assert "3 graded submissions (2 error rows, 0 missing" in axes.get_title()
    axes = plots.problem_scores(records).axes[0]
    assert [t.get_text().split()[0] for t in axes.get_xticklabels()] == list(PROBLEMS)
    means = [line.get_ydata()[0] for line in axes.lines if line.get_marker() == "D"]
    assert means == pytest.approx([100 * 8 / 12, 100 * 6 / 12, 0])  # P1, P3 and P8, the problems graded


def test_summary_counts_the_students_each_known_mistake_was_named_for(tmp_path):
    def failing(*mistakes: tuple[str, ...]) -> GradingResult:
        return GradingResult(tests=tuple(TestResult("P4", "flops", f"test {i}", 1.0, "failed", mistakes=ids)
                                         for i, ids in enumerate(mistakes)))

    write(tmp_path, "a", failing(("p4-x",), ("p4-x",)))  # named twice: one student
    write(tmp_path, "b", failing(("p4-x", "p4-y"), ()))
    write(tmp_path, "c", failing((), ()))
    write(tmp_path, "d", GradingResult(tests=sample_results()))
    out = tmp_path / "gradebook.csv"
    assert gradebook.main([str(tmp_path)], csv=out) == 0
    summary = out.with_suffix(".md").read_text()
    assert "| P4 | p4-x | 2 |\n| P4 | p4-y | 1 |" in summary
    write(tmp_path, "a", failing((), ()))
    write(tmp_path, "b", failing((), ()))
    assert gradebook.main([str(tmp_path)], csv=out) == 0
    assert "No failed test matched a known mistake." in out.with_suffix(".md").read_text()


def test_cli_defaults_are_the_python_defaults(tmp_path):
    args = build_parser().parse_args(["gradebook", str(tmp_path), str(tmp_path)])
    assert args.folders == [tmp_path, tmp_path]
    assert {k: getattr(args, k) for k in gradebook.main.__kwdefaults__} == gradebook.main.__kwdefaults__


def test_every_file_written_is_readable_by_the_course_group(tmp_path):
    write(tmp_path / "run", "alice", GradingResult(tests=sample_results()))
    out = tmp_path / "gb" / "gradebook.csv"
    previous = os.umask(0o022)
    try:
        assert gradebook.main([str(tmp_path / "run")], csv=out) == 0
    finally:
        os.umask(previous)
    modes = {name: path.stat().st_mode & 0o777 for name, path in gradebook.outputs(out).items()}
    assert modes == {"csv": 0o640, "summary": 0o640, "histogram": 0o640, "problems": 0o640}


# -- roster and overrides ----------------------------------------------------------------------------

def test_roster_adds_students_without_a_submission_and_flags_submissions_not_in_it(tmp_path, capsys):
    for student in ("alice", "bob", "zed"):
        write(tmp_path / "run", student, GradingResult(tests=sample_results()))
    roster = tmp_path / "roster.csv"
    roster.write_text("\ufeffname,student\nAlice A,alice\nBob B,bob\nCarol C,carol\n,\n", "utf-8")  # a spreadsheet's BOM
    out = tmp_path / "gradebook.csv"
    assert gradebook.main([str(tmp_path / "run")], csv=out, roster=roster) == 1
    rows = {r["student"]: r for r in table(out)}
    assert list(rows) == ["alice", "bob", "carol", "zed"]
    assert (rows["carol"]["status"], rows["carol"]["total"], rows["carol"]["notes"]) == (
        "missing", "0", "in the roster, no submission")
    assert rows["zed"]["status"] == "graded" and rows["zed"]["notes"] == "not in the roster" and not rows["bob"]["notes"]
    summary = out.with_suffix(".md").read_text()
    assert "## Not in the roster" in summary and "- zed" in summary and "- carol: in the roster, no submission" in summary
    assert "1 submissions not in the roster" in capsys.readouterr().err

    roster.write_text("student\nalice\nbob\ncarol\nzed\n")
    assert gradebook.main([str(tmp_path / "run")], csv=out, roster=roster) == 0  # no submission is no fault of the run


@pytest.mark.parametrize("text, reason", [
    ("name\nalice\n", "no student column (the header has: name)"),
    ("student\nalice\nbob\nalice\n", "line 4: alice is listed twice (also on"),
    ("student\n", "the roster lists no student"),
])
def test_a_bad_roster_is_refused_with_its_line_and_nothing_is_written(tmp_path, capsys, text, reason):
    write(tmp_path / "run", "alice", GradingResult(tests=sample_results()))
    (tmp_path / "roster.csv").write_text(text)
    out = tmp_path / "gb" / "gradebook.csv"
    assert gradebook.main([str(tmp_path / "run")], csv=out, roster=tmp_path / "roster.csv") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and reason in err and "roster.csv" in err, err
    assert not out.parent.exists()


OVERRIDES_HEADER = "student,problem,test,points,reason\n"


def test_overrides_set_scores_keep_the_reason_and_move_the_totals(tmp_path):
    write(tmp_path / "run", "alice", GradingResult(tests=sample_results(p3=("passed", "failed"))))
    write(tmp_path / "run", "bob", GradingResult(tests=sample_results()))
    write(tmp_path / "run", "carol", GradingResult(tests=sample_results()))
    write(tmp_path / "run", "dan", GradingResult(tests=(TestResult("P2", "strides", "views", 14.0, "failed",
                                                                nodeid="test_p2_strides.py::test_views"),)))
    overrides = tmp_path / "overrides.csv"
    overrides.write_text(OVERRIDES_HEADER + 'alice,p3,,12,"regrade request: rewrite 1 is right, the test was wrong"\n'
                         "bob,,P3 einsum: rewrite 0,0,academic integrity case 7\n"
                         "carol,,sizes,6,partial credit\ndan,,test_views,14,regrade request\n")
    out = tmp_path / "gradebook.csv"
    assert gradebook.main([str(tmp_path / "run")], csv=out, overrides=overrides) == 0
    rows = {r["student"]: r for r in table(out)}
    assert (rows["alice"]["P3"], rows["alice"]["total"]) == ("12", "24")  # was 6 of 12, 18 in all
    assert (rows["bob"]["P3"], rows["bob"]["total"]) == ("6", "18")  # one 6-point test taken away
    assert (rows["carol"]["P1"], rows["carol"]["total"]) == ("6", "18")
    assert (rows["dan"]["P2"], rows["dan"]["total"]) == ("14", "14")  # a test by its function name
    assert rows["alice"]["notes"] == "P3 6 -> 12 by override: regrade request: rewrite 1 is right, the test was wrong"
    assert rows["bob"]["notes"] == "P3 einsum: rewrite 0 6 -> 0 by override: academic integrity case 7"
    summary = out.with_suffix(".md").read_text()
    assert "4 overrides" in summary and "| bob | P3 einsum: rewrite 0 | 6 | 0 | academic integrity case 7 |" in summary
    assert f"mean {statistics.fmean([24, 18, 18, 14]):.2f}, median 18" in summary  # the statistics see the overrides


@pytest.mark.parametrize("lines, reason", [
    ("dave,P1,,0,x\n", "line 2: unknown student 'dave'"),
    ("alice,P9,,0,x\n", "line 2: unknown problem 'P9'"),
    ("alice,,no such test,0,x\n", "line 2: alice has no test named 'no such test'"),
    ("alice,P1,,13,x\n", "line 2: P1 is worth 0 to 12 points, got 13"),
    ("alice,,P3 einsum: rewrite 0,-1,x\n", "is worth 0 to 6 points, got -1"),
    ("alice,P1,,ten,x\n", "line 2: points must be a number, got 'ten'"),
    ("alice,P1,sizes,0,x\n", "line 2: give either a problem or a test, not both"),
    ("alice,P1,,0,\n", "line 2: give a reason"),
    ("alice,P1,,0,x\nalice,P1,,0,y\n", "line 3: alice P1 is already overridden on"),
    ("alice,P3,,0,x\nalice,,rewrite 0,0,y\n", "line 3: alice P3 einsum: rewrite 0 is also overridden on"),
    ("alice,,rewrite 0,0,x\nalice,,P3 einsum: rewrite 0,0,y\n", "line 3: alice P3 einsum: rewrite 0 is also overridden"),
    ("mia,P1,,0,x\n", "line 2: mia has no grade to override (error); regrade first: grader batch"),
])
def test_a_bad_override_is_refused_with_its_line_and_nothing_is_written(tmp_path, capsys, lines, reason):
    write(tmp_path / "run", "alice", GradingResult(tests=sample_results()))
    write(tmp_path / "run", "mia", GradingResult.failed("mia.zip", "not a readable zip file"))
    (tmp_path / "overrides.csv").write_text(OVERRIDES_HEADER + lines)
    out = tmp_path / "gb" / "gradebook.csv"
    assert gradebook.main([str(tmp_path / "run")], csv=out, overrides=tmp_path / "overrides.csv") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and reason in err and "overrides.csv" in err, err
    assert not out.parent.exists()


def test_overrides_need_their_columns(tmp_path, capsys):
    write(tmp_path / "run", "alice", GradingResult(tests=sample_results()))
    (tmp_path / "overrides.csv").write_text("student,points,reason\nalice,0,x\n")
    assert gradebook.main([str(tmp_path / "run")], csv=tmp_path / "g.csv", overrides=tmp_path / "overrides.csv") == 2
    assert "no problem or test column" in capsys.readouterr().err
