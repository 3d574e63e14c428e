"""grader batch: a class graded in shards merges to the unsharded gradebook; resuming regrades
nothing finished; every kind of broken submission is an error row and the batch goes on.

Grading goes through a fake grade command (``fixtures/fake_grade.py``) except in
``test_real_grading_of_a_small_class``, which runs ``python -m grader grade`` itself.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
import zipfile
from collections import Counter
from pathlib import Path

import pytest
import torch
from _classroom import FAKE_GRADE, KIT, grade_class, make_class, package, results

from grader.classroom import batch, batch_judge, gradebook
from grader.options import GradingOptions
from grader.problems import PROBLEMS
from grader.cli import UsageError, build_parser


def _rows_without_time(csv_path: Path) -> list[dict[str, str]]:
    with open(csv_path, newline="") as stream:
        return [{k: v for k, v in row.items() if k != "graded_at"} for row in csv.DictReader(stream)]


def _graded_log(path: Path) -> list[str]:
    return sorted(path.read_text().split()) if path.exists() else []


def _leftover_judges(marker: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "fake_grade.py" in cmdline and marker in cmdline:
            found.append(cmdline)
    return found


# -- the class, in shards and whole ---------------------------------------------------------------

def test_shards_merge_to_the_same_gradebook_as_one_unsharded_run(tmp_path):
    folder = make_class(tmp_path / "class")
    assert len(list(folder.iterdir())) >= 30
    assert grade_class(folder, tmp_path / "whole") == 1
    for index in (1, 2, 3):
        assert grade_class(folder, tmp_path / f"shard{index}", shard=f"{index}/3") == 1

    listed = [set(json.loads((tmp_path / f"shard{i}" / "batch.json").read_text())["students"]) for i in (1, 2, 3)]
    everyone = set(json.loads((tmp_path / "whole" / "batch.json").read_text())["students"])
    assert set.union(*listed) == everyone and sum(map(len, listed)) == len(everyone) and all(listed)

    shards = [tmp_path / f"shard{i}" for i in (1, 2, 3)]
    assert gradebook.main([str(tmp_path / "whole")], csv=tmp_path / "a" / "gradebook.csv") == 0
    assert gradebook.main([str(p) for p in shards], csv=tmp_path / "b" / "gradebook.csv") == 0
    assert gradebook.main([str(p) for p in reversed(shards)], csv=tmp_path / "c" / "gradebook.csv") == 0
    assert _rows_without_time(tmp_path / "a" / "gradebook.csv") == _rows_without_time(tmp_path / "b" / "gradebook.csv")
    assert (tmp_path / "b" / "gradebook.csv").read_bytes() == (tmp_path / "c" / "gradebook.csv").read_bytes()
    assert (tmp_path / "a" / "gradebook.md").read_text() == (tmp_path / "b" / "gradebook.md").read_text()
    # the whole run and the shards together: every student twice, identical, so accepted
    assert gradebook.main([str(tmp_path / "whole"), *map(str, shards)], csv=tmp_path / "d" / "gradebook.csv") == 0
    assert _rows_without_time(tmp_path / "d" / "gradebook.csv") == _rows_without_time(tmp_path / "a" / "gradebook.csv")

    rows = {row["student"]: row for row in _rows_without_time(tmp_path / "a" / "gradebook.csv")[1:]}
    assert len(rows) == len(everyone) >= 30
    assert {rows[f"ref{i:02d}"]["total"] for i in range(12)} == {"98"}  # 2 GPU points not run on this machine
    assert {rows[f"stub{i:02d}"]["total"] for i in range(8)} == {"0"}
    assert rows["bug-flops"]["total"] == "96" and rows["bug-flops"]["P4"] == "12"  # P4 loses its 2 points only
    assert rows["syntax"]["total"] == "86" and rows["syntax"]["P3"] == "0"  # P3 cannot compile
    errors = {s for s, row in rows.items() if row["status"] == "error"}
    assert errors == {"empty", "notzip", "notes.txt", "crash", "garbage"}
    assert all(rows[s]["total"] == "0" and rows[s]["P1"] == "" and rows[s]["notes"] for s in errors)  # 0, and why
    assert "exited with code 1" in rows["crash"]["notes"]
    summary = (tmp_path / "a" / "gradebook.md").read_text()
    assert "| P4 flops |" in summary and "Most often failed" in summary and "garbage" in summary
    assert (tmp_path / "a" / "gradebook.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_students_shard_depends_on_the_id_alone():
    ids = [f"student{i}" for i in range(2000)]
    assert batch.shard_of("alice", 4) == 4 and batch.shard_of("bob", 4) == 3  # the documented scheme, pinned
    assert [batch.shard_of(s, 5) for s in ids[:100]] == [batch.shard_of(s, 5) for s in reversed(ids[:100])][::-1]
    sizes = Counter(batch.shard_of(s, 4) for s in ids)
    assert set(sizes) == {1, 2, 3, 4} and all(400 < n < 600 for n in sizes.values())
    assert batch.parse_shard("2/4") == (2, 4)
    for bad in ("0/4", "5/4", "2", "a/b", "1/0"):
        with pytest.raises(ValueError, match="--shard"):
            batch.parse_shard(bad)


def test_content_hash_follows_content_not_place(tmp_path):
    a = package(KIT / "solutions", tmp_path / "one" / "alice")
    b = package(KIT / "solutions", tmp_path / "two" / "alice")
    assert batch.content_hash((a,)) == batch.content_hash((b,))
    (b / "assignment" / "__pycache__").mkdir()
    (b / "assignment" / "__pycache__" / "memory.cpython-311.pyc").write_bytes(b"\0")
    assert batch.content_hash((a,)) == batch.content_hash((b,))
    (b / "assignment" / "memory.py").write_text("# changed\n", "utf-8")
    assert batch.content_hash((a,)) != batch.content_hash((b,))


# -- resuming --------------------------------------------------------------------------------------

def test_a_grade_command_stopped_by_sigint_keeps_no_result_and_a_rerun_grades_it(tmp_path, capsys):
    """Ctrl-C can reach a grade command the batch starts at that very moment, before the batch stops: its
    exit then is no grading error to keep (a rerun would skip the student), only a result not yet made."""
    folder = tmp_path / "class"
    package(KIT / "solutions", folder / "alice")
    package(KIT / "solutions", folder / "bob", edit={"memory": "# FAKE_SIGINT"})
    out = tmp_path / "out"
    assert grade_class(folder, out) == 1
    assert set(results(out)) == {"alice"}
    assert "bob: its grading was interrupted (SIGINT)" in capsys.readouterr().err.replace("error ", "")
    (folder / "bob" / "assignment" / "memory.py").write_text((KIT / "solutions" / "memory.py").read_text())
    assert grade_class(folder, out) == 0
    assert results(out)["bob"]["extra_data"]["batch"]["status"] == "graded"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_or_sigterm_keeps_what_finished_and_a_rerun_grades_only_the_rest(tmp_path, signum):
    """Ctrl-C reaches the terminal's foreground group; SIGTERM (kill PID, Slurm, CI) the batch alone, and stops
    it even where SIGINT is ignored, as it is for a background job of a shell script."""
    folder = tmp_path / "class"
    for i in range(10):
        package(KIT / "solutions", folder / f"s{i:02d}")
    out = tmp_path / "out"
    script = (f"import sys; from grader.classroom.batch import main; from grader.options import GradingOptions; "
              f"sys.exit(main({str(folder)!r}, out={str(out)!r}, jobs=2, options=GradingOptions(gpu='off'), "
              f"grade_command={FAKE_GRADE!r}))")
    env = {**os.environ, "FAKE_GRADE_SECONDS": "1.5", "PYTHONPATH": str(KIT)}
    # A background job of a shell ignores SIGINT and its children inherit that: for Ctrl-C, restore it as a terminal
    # has it; for SIGTERM, ignore it as such a job has it.
    sigint = signal.SIG_DFL if signum == signal.SIGINT else signal.SIG_IGN
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, cwd=KIT, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, sigint))
    deadline = time.monotonic() + 120
    while len(list((out / "results").glob("*.json"))) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    if signum == signal.SIGINT:
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole foreground group
    else:
        os.kill(proc.pid, signal.SIGTERM)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, output
    assert "interrupted" in output and "resume" in output
    assert not _leftover_judges(str(folder)), "a judge outlived the interrupted batch"

    kept = results(out)
    assert 2 <= len(kept) < 10 and all(r["extra_data"]["batch"]["status"] == "graded" for r in kept.values())
    assert not [p for p in (out / "results").iterdir() if p.suffix != ".json"], "a half-written file was left"
    before = {p.name: p.read_bytes() for p in (out / "results").glob("*.json")}

    log = tmp_path / "graded.log"
    os.environ["FAKE_GRADE_LOG"] = str(log)
    try:
        assert grade_class(folder, out) == 0
        assert _graded_log(log) == sorted(set(f"s{i:02d}" for i in range(10)) - set(kept))
        assert {p.name: p.read_bytes() for p in (out / "results").glob("*.json") if p.name in before} == before
        log.unlink()
        assert grade_class(folder, out) == 0 and _graded_log(log) == []  # all done: nothing regraded
    finally:
        del os.environ["FAKE_GRADE_LOG"]


def test_rerun_regrades_exactly_what_changed(tmp_path, monkeypatch):
    folder = tmp_path / "class"
    for name in ("alice", "bob", "carol"):
        package(KIT / "solutions", folder / name)
    (folder / "dave").mkdir()  # an error row
    out, log = tmp_path / "out", tmp_path / "graded.log"
    monkeypatch.setenv("FAKE_GRADE_LOG", str(log))
    assert grade_class(folder, out) == 1 and _graded_log(log) == ["alice", "bob", "carol", "dave"]

    log.unlink()
    (folder / "bob" / "assignment" / "flops.py").write_text("# FAKE_BUG\n", "utf-8")
    assert grade_class(folder, out) == 1 and _graded_log(log) == ["bob"]
    assert results(out)["bob"]["score"] < results(out)["alice"]["score"]

    log.unlink()
    assert grade_class(folder, out, seed=7) == 1 and _graded_log(log) == ["alice", "bob", "carol", "dave"]  # options

    log.unlink()
    package(KIT / "solutions", tmp_path / "fixed")
    (folder / "dave").rmdir()
    (tmp_path / "fixed").rename(folder / "dave")
    assert grade_class(folder, out, seed=7) == 0 and _graded_log(log) == ["dave"]  # its content changed

    log.unlink()
    (folder / "erin").mkdir()
    assert grade_class(folder, out, seed=7) == 1 and _graded_log(log) == ["erin"]
    log.unlink()
    assert grade_class(folder, out, seed=7) == 1 and _graded_log(log) == []  # error rows stand...
    assert grade_class(folder, out, seed=7, retry_errors=True) == 1 and _graded_log(log) == ["erin"]  # ...unless asked
    assert results(out)["erin"]["extra_data"]["batch"]["status"] == "error"
    log.unlink()

    monkeypatch.setattr(batch, "_cuda_available", lambda: False)
    assert grade_class(folder, out, seed=7, gpu="auto") == 1 and len(_graded_log(log)) == 5  # options changed
    log.unlink()
    monkeypatch.setattr(batch, "_cuda_available", lambda: True)  # a GPU now: provisional grades become official
    assert grade_class(folder, out, seed=7, gpu="auto") == 1 and _graded_log(log) == ["alice", "bob", "carol", "dave"]


def test_a_test_the_grader_could_not_judge_makes_an_error_row_that_retry_errors_regrades(tmp_path, monkeypatch):
    folder = tmp_path / "class"
    package(KIT / "solutions", folder / "alice")
    package(KIT / "solutions", folder / "bob", edit={"einsum": "# FAKE_UNJUDGED"})
    out, log = tmp_path / "out", tmp_path / "graded.log"
    monkeypatch.setenv("FAKE_GRADE_LOG", str(log))
    assert grade_class(folder, out) == 1 and _graded_log(log) == ["alice", "bob"]
    rows = results(out)
    assert rows["alice"]["extra_data"]["batch"]["status"] == "graded"
    assert rows["bob"]["extra_data"]["batch"]["status"] == "error" and not rows["bob"]["extra_data"]["grader_error"]
    log.unlink()
    assert grade_class(folder, out) == 1 and _graded_log(log) == []
    assert grade_class(folder, out, retry_errors=True) == 1 and _graded_log(log) == ["bob"]


def test_only_regrades_the_named_students_and_keeps_the_rest(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "class"
    for name in ("alice", "bob", "carol"):
        package(KIT / "solutions", folder / name)
    out, log = tmp_path / "out", tmp_path / "graded.log"
    monkeypatch.setenv("FAKE_GRADE_LOG", str(log))
    assert grade_class(folder, out) == 0 and _graded_log(log) == ["alice", "bob", "carol"]
    kept = {p.name: p.read_bytes() for p in (out / "results").glob("*.json") if p.stem != "bob"}
    log.unlink()
    assert grade_class(folder, out, only=["bob"]) == 0 and _graded_log(log) == ["bob"]  # unchanged, regraded all the same
    assert {p.name: p.read_bytes() for p in (out / "results").glob("*.json") if p.stem != "bob"} == kept
    assert json.loads((out / "batch.json").read_text())["students"] == ["alice", "bob", "carol"]
    assert {s.get("name") for s in ET.parse(out / "junit.xml").getroot().findall("testsuite")} == {"alice", "bob", "carol"}
    assert gradebook.main([str(out)], csv=tmp_path / "gradebook.csv") == 0
    capsys.readouterr()
    log.unlink()
    assert grade_class(folder, out, only=["bob", "dave"]) == 2 and _graded_log(log) == []
    assert "--only: no submission for dave" in capsys.readouterr().err


# -- nothing stops the batch ---------------------------------------------------------------------

def test_every_kind_of_breakage_is_an_error_row_and_the_batch_goes_on(tmp_path, monkeypatch):
    monkeypatch.setattr(batch_judge, "GRACE_SECONDS", 0.5)
    folder = tmp_path / "class"
    package(KIT / "solutions", folder / "alice")
    package(KIT / "solutions", folder / "hang", edit={"memory": "# FAKE_HANG"})
    package(KIT / "solutions", folder / "crash", edit={"memory": "# FAKE_CRASH"})
    package(KIT / "solutions", folder / "garbage", edit={"memory": "# FAKE_GARBAGE"})
    package(KIT / "solutions", folder / "twice")
    with zipfile.ZipFile(folder / "twice.zip", "w") as archive:
        archive.writestr("memory.py", "x = 1\n")
    (folder / "broken.zip").write_bytes(b"PK\x03\x04 not really")
    (folder / ".DS_Store").write_bytes(b"")  # hidden entries are not submissions
    out = tmp_path / "out"
    started = time.monotonic()
    assert grade_class(folder, out, timeout_seconds=3.0) == 1
    assert time.monotonic() - started < 60
    rows = results(out)
    assert set(rows) == {"alice", "hang", "crash", "garbage", "twice", "broken"}
    assert rows["alice"]["extra_data"]["batch"]["status"] == "graded" and rows["alice"]["score"] == 98
    errors = {s: r["extra_data"]["grader_error"] for s, r in rows.items() if r["extra_data"]["batch"]["status"] == "error"}
    assert set(errors) == {"hang", "crash", "garbage", "twice", "broken"}
    assert "longer than 3 s" in errors["hang"] and "exited with code 1" in errors["crash"]
    assert "the judge fell over" in errors["crash"] and "no readable results" in errors["garbage"]
    assert "twice, twice.zip" in errors["twice"] and "zip" in errors["broken"]
    for row in rows.values():  # each a well-formed results.json with the visible failure entry
        assert row["score"] == 0 or row["extra_data"]["batch"]["status"] == "graded"
        assert row["extra_data"]["batch"]["status"] == "graded" or row["tests"][0]["name"] == "Autograder failed"
    assert not _leftover_judges(str(folder)), "the timed-out judge was not killed"
    assert "the judge fell over" in (out / "logs" / "crash.log").read_text()
    suites = {s.get("name"): s for s in ET.parse(out / "junit.xml").getroot().findall("testsuite")}
    assert set(suites) == set(rows) and suites["hang"].find("testcase").get("name") == "Autograder failed"
    assert {c.get("classname") for c in suites["alice"].findall("testcase")} == set(PROBLEMS)


def test_a_class_archive_is_graded_like_the_folder(tmp_path):
    folder = tmp_path / "term" / "submissions"
    for name in ("alice", "bob"):
        package(KIT / "solutions", folder / name)
    package(KIT / "assignment", folder / "carol")
    archive = tmp_path / "class.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        for path in sorted(folder.rglob("*.py")):
            bundle.write(path, path.relative_to(folder.parent).as_posix())
    assert grade_class(folder, tmp_path / "a") == 0 and grade_class(archive, tmp_path / "b") == 0
    a, b = results(tmp_path / "a"), results(tmp_path / "b")
    assert set(a) == set(b) == {"alice", "bob", "carol"}
    assert {s: (r["score"], r["extra_data"]["batch"]["content_hash"]) for s, r in a.items()} == \
           {s: (r["score"], r["extra_data"]["batch"]["content_hash"]) for s, r in b.items()}


# -- the command line -----------------------------------------------------------------------------

def test_cli_defaults_are_the_python_defaults_and_bad_input_is_refused(tmp_path, capsys):
    args = build_parser().parse_args(["batch", "x", "--out", "y"])
    for name, default in batch.main.__kwdefaults__.items():
        if hasattr(args, name) and name != "out":
            assert getattr(args, name) == default, name
    with pytest.raises(UsageError, match="I must be between 1 and N"):
        build_parser().parse_args(["batch", "x", "--out", "y", "--shard", "0/3"])
    assert batch.main(str(tmp_path / "nope"), out=tmp_path / "out") == 2
    assert "no such folder" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_gpu_require_refuses_to_start_without_cuda(tmp_path, capsys):
    (tmp_path / "class" / "alice").mkdir(parents=True)
    assert batch.main(str(tmp_path / "class"), out=tmp_path / "out", options=GradingOptions(gpu="require")) == 2
    assert "no CUDA device" in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_real_grading_of_a_small_class(tmp_path):
    """The default command: ``python -m grader grade`` per submission, one problem, two at a time."""
    folder = tmp_path / "class"
    package(KIT / "solutions", folder / "alice")
    (folder / "bob").mkdir()
    assert grade_class(folder, tmp_path / "out", grade_command=batch.GRADE_COMMAND, problems=["P1"], profile="ci",
                       timeout_seconds=600.0) == 1  # a machine shared with others can take more than a minute
    rows = results(tmp_path / "out")
    assert rows["alice"]["extra_data"]["batch"]["status"] == "graded"
    assert rows["alice"]["score"] == rows["alice"]["extra_data"]["problems"]["P1"]["max_score"] == 12
    assert rows["bob"]["extra_data"]["batch"]["status"] == "error" and "no assignment package" in rows["bob"]["extra_data"]["grader_error"]
    assert "Upload again: a readable .zip with your assignment/ folder" in rows["bob"]["output"]  # what bob reads


def test_throughput_benchmark_reports_a_ratio_and_a_base_revision_graded_in_turn():
    run = subprocess.run([sys.executable, "-m", "grader.bench.batch_throughput", "--copies", "2", "--base", "HEAD",
                          "--grade-command", " ".join(FAKE_GRADE)], cwd=KIT, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    assert "\nthroughput ratio (--jobs 2 / --jobs 1): " in run.stdout and "CPU-s per submission" in run.stdout
    assert run.stdout.count("submissions/hour") == 4, run.stdout
    assert "this kit / HEAD, --jobs 1: CPU " in run.stdout and "this kit / HEAD, --jobs 2: CPU " in run.stdout
    assert "HEAD: throughput ratio (--jobs 2 / --jobs 1): " in run.stdout


def test_the_batch_help_documents_its_exit_statuses_and_sigterm(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["batch", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "exit 1 when it finishes with error rows or unmatched files" in text
    assert "130 when stopped by SIGINT or SIGTERM" in text and "ignores SIGINT: use SIGTERM" in text
