"""grader report: one self-contained page of the class (totals, problems, failed tests, known
mistakes, errors and missing rows, similarity pairs, each student's feedback), checked in a real
headless browser (Debian's chromium; skipped with the reason where it is absent): it loads without
console messages, shows the class's mean, and a screenshot is written. Results are made here."""

from __future__ import annotations

import csv
import json
import re
import shutil
import statistics
import subprocess

import pytest

from grader.cli import main as grader
from grader.grading.results import GradingResult, TestResult, write_json_atomic
from grader.tests.classroom.test_gradebook import sample_results, write

CHROMIUM = shutil.which("chromium")
CONSOLE = re.compile(r":CONSOLE[:(\]]")  # chromium's log line for each console message of the page


@pytest.fixture
def out(tmp_path):
    """A class of four: two graded, one a known mistake named, one error; a similarity pair to review."""
    write(tmp_path / "run", "alice", GradingResult(tests=sample_results(p3=("passed", "failed"))))
    write(tmp_path / "run", "bob", GradingResult(tests=sample_results()))
    named = TestResult("P3", "einsum", "rewrite 9", 6.0, "failed", mistakes=("p3-linear-weight-layout",))
    write(tmp_path / "run", "dave", GradingResult(tests=sample_results(p1=0) + (named,)))
    write(tmp_path / "run", "carol", GradingResult.failed("carol.zip", "not a readable zip file"))
    (tmp_path / "sim").mkdir()
    (tmp_path / "sim" / "similarity.csv").write_text("a,b,score,a_in_b,b_in_a,lines,baseline,to_review,cluster\n"
                                                     "alice,bob,0.910,0.910,0.800,420,0.300,yes,1\n")
    assert grader(["gradebook", str(tmp_path / "run"), "--csv", str(tmp_path / "gb.csv")]) == 0
    assert grader(["report", str(tmp_path / "run"), "--similarity", str(tmp_path / "sim"),
                   "--html", str(tmp_path / "report.html")]) == 0
    return tmp_path


def class_mean(folder) -> str:
    """The mean of the graded totals, from the gradebook's CSV (not from the page)."""
    with open(folder / "gb.csv", newline="") as stream:
        rows = [r for r in csv.DictReader(stream) if r["status"] == "graded"]
    return f"{statistics.fmean(float(r['total']) for r in rows):.2f}"


def test_the_page_holds_every_section_and_fetches_nothing(out):
    page = (out / "report.html").read_text()
    assert f"Class mean <strong>{class_mean(out)}</strong>" in page
    assert page.count("<svg") == 2 and "<script" not in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert '<td>p3-linear-weight-layout</td><td>linear reads w as (d_in, d_out)' in page  # what to re-teach, why, who
    assert '<td class="n">1</td><td><a href="#student-dave">dave</a>' in page
    assert "P3 rewrite 1: failed by 1 of" in page and 'class="error">error</td>' in page
    assert '<a href="sim/clusters/cluster-1.html">1</a></td>\n<td>alice, bob</td><td class="n">1</td>' in page
    assert 'href="sim/similarity.html"' in page
    assert 'id="student-carol"' in page and "[failed] P3 einsum: rewrite 1: 0 / 6" in page  # grader show's text


def test_bad_input_is_refused_on_one_line_and_nothing_is_written(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert grader(["report", str(tmp_path / "empty"), "--html", str(tmp_path / "r.html")]) == 2
    assert grader(["report", str(tmp_path / "empty"), "--html", str(tmp_path)]) == 2
    first, second = capsys.readouterr().err.splitlines()
    assert "grader report: no results found in" in first and "is a folder: give a file path" in second
    assert not (tmp_path / "r.html").exists()


def _browse(page, screenshot) -> tuple[str, str]:
    """(the DOM chromium built, its log) for ``page``, a screenshot written."""
    common = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
              "--window-size=1200,1600", f"file://{page}"]
    shot = subprocess.run([*common[:-1], f"--screenshot={screenshot}", common[-1]], capture_output=True, text=True,
                          timeout=120)
    dom = subprocess.run([*common[:-1], "--dump-dom", common[-1]], capture_output=True, text=True, timeout=120)
    return dom.stdout, shot.stderr + dom.stderr


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)")
def test_the_page_loads_in_a_headless_browser_without_console_messages(out):
    dom, log = _browse(out / "report.html", out / "report.png")
    assert not [line for line in log.splitlines() if CONSOLE.search(line)]
    assert re.search(rf"Class mean <strong>{class_mean(out)}</strong>", dom)
    assert (out / "report.png").stat().st_size > 10_000
    # the check catches a page that logs: the same page with a script that fails
    broken = out / "broken.html"
    broken.write_text((out / "report.html").read_text().replace("</body>", "<script>undefinedCall()</script></body>"))
    _, log = _browse(broken, out / "broken.png")
    assert [line for line in log.splitlines() if CONSOLE.search(line)]


def _problem_row(page: str, key: str) -> list[str]:
    """The cells of ``key``'s row in the per-problem table."""
    row = re.search(rf"<tr><td>{key} \w+</td>(.*?)</tr>", page, re.S).group(1)
    return re.findall(r'<td class="n">([^<]*)</td>', row)


def test_provisional_grades_are_bannered_and_flagged_and_columns_agree_on_tests_not_run(out):
    page = (out / "report.html").read_text()
    assert 'id="provisional"' in page and "3 of\n3 grades have GPU tests not run" in page
    assert "<td>graded</td>\n<td></td><td>provisional, similar</td>" in page  # alice: provisional, in a pair to review
    # bob's perfect P3 and everyone's unrun P8: mean % and tests passed both leave the test not run out
    graded, mean, points, percent, passed, not_run = _problem_row(page, "P8")
    assert (percent, passed, not_run) == ("-", "-", "3")
    assert _problem_row(page, "P1")[3:] == ["66.7", "66.7%", "0"]


def test_a_class_with_every_test_run_has_no_banner(tmp_path):
    complete = tuple(t for t in sample_results() if t.status != "not_run")
    write(tmp_path / "run", "alice", GradingResult(tests=complete))
    assert grader(["report", str(tmp_path / "run"), "--html", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    assert 'id="provisional"' not in page and _problem_row(page, "P3")[3:] == ["100.0", "100.0%", "0"]


def _student_tests(index: int) -> tuple[TestResult, ...]:
    """Eleven tests for each of eight problems: every 10th student a stub, every 7th a known mistake, the rest passing."""
    tests = []
    for key, module in (("P1", "memory"), ("P2", "strides"), ("P3", "einsum"), ("P4", "flops"), ("P5", "optim"),
                        ("P6", "data"), ("P7", "checkpoint"), ("P8", "amp")):
        for n in range(11):
            if index % 10 == 0:
                message = (f"{module}.f{n}(1) raised NotImplementedError: {module}.f{n} is not implemented yet: see "
                           f"handout.md, section '{module}.f{n}'")
                tests.append(TestResult(key, module, f"f{n} works on every drawn input", 1.0, "failed",
                                        message=message))
            elif index % 7 == 0 and key == "P3" and n == 0:
                tests.append(TestResult(key, module, "linear matches torch", 1.0, "failed", message="got (3, 2)",
                                        mistakes=("p3-linear-weight-layout",)))
            else:
                tests.append(TestResult(key, module, f"f{n} works on every drawn input", 1.0, "passed"))
    return tuple(tests)


def test_a_class_of_300_gives_a_report_under_2_mb_with_late_days_and_who_made_each_mistake(tmp_path):
    for index in range(300):
        path = write(tmp_path / "run", f"student{index:03d}", GradingResult(tests=_student_tests(index)))
        data = json.loads(path.read_text())
        data["extra_data"]["batch"]["lms"] = {"lms": "gradescope",
                                              "submitted_at": f"2026-03-0{4 + index % 3}T10:00:00-08:00"}
        write_json_atomic(path, data)
    (tmp_path / "late.yml").write_text("due: 2026-03-04T23:59:00-08:00\nlate_days: 1\npenalty_per_day: 20\n")
    assert grader(["report", str(tmp_path / "run"), "--late", str(tmp_path / "late.yml"),
                   "--html", str(tmp_path / "report.html")]) == 0
    page = (tmp_path / "report.html").read_text()
    assert len(page.encode()) < 2_000_000, len(page.encode())
    assert page.count('<section id="student-') == 300 and "88 tests passed (not listed)" in page
    assert "<td>2 days late (1 free, -17.6 points)</td>" in page  # student002: 88 points, one day charged: 20%
    assert '<a href="#student-student007">student007</a>' in page.split("p3-linear-weight-layout")[1]
    assert "[not implemented] P1 memory: 11 tests" in page and "30 rows\nleft at least one function" in page
    assert page.count("stubs left</td></tr>") == 30  # flagged in the students' table
    assert "f0 works on every drawn input" not in page.split("Tests most often failed")[1].split("<h2>")[0]
    if CHROMIUM:
        dom, log = _browse(tmp_path / "report.html", tmp_path / "report.png")
        assert 'id="student-student299"' in dom and not [line for line in log.splitlines() if CONSOLE.search(line)]
