"""A class as the LMS hands it over: a Gradescope "Export Submissions" zip and a Canvas "Download
Submissions" folder, built here from their documented layouts, are graded without renaming anything;
each student's row carries what the LMS matches; what is no student's submission is reported by name
with the reason, and makes the batch's exit status 1. Grading goes through the fake grader."""

from __future__ import annotations

import csv
import json
import zipfile
from pathlib import Path

import pytest
from _classroom import KIT, grade_class, package, results, zipped

from grader.cli import main as grader
from grader.classroom.batch_entries import BatchError
from grader.classroom.layouts import canvas, read_class

# Gradescope's metadata: Ruby symbol keys, a group submission with two submitters, a submission without a folder
METADATA = """\
submission_111:
  :submitters:
  - :name: Alice Liddell
    :sid: '1001'
    :email: alice@uni.edu
  :created_at: 2026-03-02 23:59:01.123456000 -08:00
  :score: 0.0
  :status: processed
submission_112:
  :submitters:
  - :name: Bob Babbage
    :sid: '1002'
    :email: bob@uni.edu
  - :name: Carol Cray
    :sid: '1003'
    :email: carol@uni.edu
  :created_at: 2026-03-03 08:15:00.000000000 -08:00
  :score: 0.0
submission_113:
  :submitters:
  - :name: Dave Dee
    :sid: '1004'
    :email: dave@uni.edu
  :created_at: 2026-03-03 09:00:00.000000000 -08:00
"""


@pytest.fixture
def gradescope_export(tmp_path) -> Path:
    """The zip Gradescope's "Export Submissions" downloads: one folder, the metadata and a folder per submission."""
    top = tmp_path / "export" / "assignment_4242_export"
    package(KIT / "solutions", top / "submission_111")
    package(KIT / "solutions", top / "submission_112", nested=False)
    (top / "submission_999").mkdir()
    (top / "submission_999" / "memory.py").write_text("x = 1\n")
    (top / "submission_metadata.yml").write_text(METADATA)
    archive = tmp_path / "assignment_4242_export.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        for path in sorted((tmp_path / "export").rglob("*")):
            bundle.write(path, path.relative_to(tmp_path / "export").as_posix())
    return archive


@pytest.fixture
def canvas_download(tmp_path) -> Path:
    """Canvas's "Download Submissions", unzipped: one flat folder, each file named login[_LATE]_user_submission_name."""
    folder = tmp_path / "submissions"
    folder.mkdir()
    zipped(package(KIT / "solutions", tmp_path / "hw3")).rename(folder / "liddellalice_1001_5001_hw3.zip")
    for path in (KIT / "solutions").glob("*.py"):
        name = "memory-1.py" if path.name == "memory.py" else path.name  # Canvas renames a re-uploaded file
        (folder / f"babbagebob_LATE_1002_5002_{name}").write_bytes(path.read_bytes())
    (folder / "grades.csv").write_text("not a submission\n")
    return folder


def _manifest(out: Path) -> dict:
    return json.loads((out / "batch.json").read_text())


def _rows(path: Path) -> list[list[str]]:
    with open(path, newline="") as stream:
        return list(csv.reader(stream))


def test_a_gradescope_export_is_graded_as_it_comes_one_row_per_submitter(gradescope_export, tmp_path, capsys):
    out = tmp_path / "out"
    assert grade_class(gradescope_export, out) == 1  # a folder the metadata does not list, a listed one absent
    graded = results(out)
    assert set(graded) == {"alice@uni.edu", "bob@uni.edu", "carol@uni.edu"}
    assert {s: r["score"] for s, r in graded.items()} == dict.fromkeys(graded, 98)
    assert graded["alice@uni.edu"]["extra_data"]["batch"]["lms"] == {
        "lms": "gradescope", "name": "Alice Liddell", "sid": "1001", "email": "alice@uni.edu",
        "submission": "submission_111", "submitted_at": "2026-03-02T23:59:01.123456-08:00"}
    manifest = _manifest(out)
    assert manifest["layout"] == "gradescope"
    assert manifest["unmatched"] == [
        {"name": "submission_113", "reason": "listed in submission_metadata.yml, but the export has no folder "
                                             "submission_113/"},
        {"name": "submission_999", "reason": "not a submission folder listed in submission_metadata.yml"}]
    err = capsys.readouterr().err
    assert "not graded submission_999: not a submission folder" in " ".join(err.split())

    assert grader(["gradebook", str(out), "--csv", str(tmp_path / "gb.csv"), "--lms", "plain",
                   "--lms-out", str(tmp_path / "plain.csv"), "--provisional", "as-is"]) == 0
    header, *rows = _rows(tmp_path / "plain.csv")
    assert header[:6] == ["student", "name", "sid", "email", "submission", "submitted_at"]
    assert rows[1][:4] == ["bob@uni.edu", "Bob Babbage", "1002", "bob@uni.edu"]
    # Canvas cannot match these students without a roster: refused by name, nothing written
    assert grader(["gradebook", str(out), "--csv", str(tmp_path / "gb2.csv"), "--lms", "canvas",
                   "--lms-out", str(tmp_path / "canvas.csv"), "--provisional", "as-is"]) == 2
    err = capsys.readouterr().err
    assert "3 students have no Canvas ID" in err and "alice@uni.edu" in err and "give --roster" in err
    assert not (tmp_path / "canvas.csv").exists() and err.count("\n") == 1


def test_a_canvas_download_is_graded_as_it_comes_and_posts_to_canvas_without_a_roster(canvas_download, tmp_path,
                                                                                        capsys):
    out = tmp_path / "out"
    assert grade_class(canvas_download, out) == 1  # grades.csv matched no student
    graded = results(out)
    assert {s: r["score"] for s, r in graded.items()} == {"babbagebob": 98, "liddellalice": 98}
    assert graded["babbagebob"]["extra_data"]["batch"]["lms"] == {
        "lms": "canvas", "name": "babbagebob", "ID": "1002", "submission": "5002", "late": "true"}
    assert graded["liddellalice"]["extra_data"]["batch"]["lms"]["late"] == "false"
    assert _manifest(out)["unmatched"] == [{"name": "grades.csv", "reason": canvas.NOT_CANVAS}]

    assert grader(["gradebook", str(out), "--csv", str(tmp_path / "gb.csv"), "--lms", "canvas",
                   "--lms-out", str(tmp_path / "canvas.csv"), "--provisional", "as-is"]) == 0
    assert _rows(tmp_path / "canvas.csv")[2:] == [["babbagebob", "1002", "", "", "", "98"],
                                                 ["liddellalice", "1001", "", "", "", "98"]]


def test_a_roster_gives_canvas_its_names_and_a_student_not_in_it_keeps_the_downloads_id(canvas_download, tmp_path,
                                                                                        capsys):
    out = tmp_path / "out"
    grade_class(canvas_download, out)
    (tmp_path / "roster.csv").write_text("student,Student,ID\nliddellalice,\"Liddell, Alice\",1001\n")
    assert grader(["gradebook", str(out), "--csv", str(tmp_path / "gb.csv"), "--roster", str(tmp_path / "roster.csv"),
                   "--lms", "canvas", "--lms-out", str(tmp_path / "canvas.csv"), "--provisional", "as-is"]) == 1
    assert "1 submissions not in the roster" in capsys.readouterr().err
    assert _rows(tmp_path / "canvas.csv")[2:] == [["babbagebob", "1002", "", "", "", "98"],
                                                 ["Liddell, Alice", "1001", "", "", "", "98"]]


def test_canvas_users_sharing_a_login_keep_apart_and_a_second_file_of_one_name_is_reported(tmp_path):
    folder = tmp_path / "dl"
    folder.mkdir()
    for user in ("1001", "1002"):
        (folder / f"smithjo_{user}_50{user[-1]}_memory.py").write_text("x = 1\n")
    (folder / "smithjo_1001_501_memory-1.py").write_text("x = 2\n")
    intake = read_class(folder, tmp_path / "scratch")
    assert intake.layout == "canvas"
    assert [(e.student, e.lms["ID"]) for e in intake.entries] == [("smithjo-1001", "1001"), ("smithjo-1002", "1002")]
    assert [u.name for u in intake.unmatched] == ["smithjo_1001_501_memory.py"]  # memory-1.py, the re-upload, kept
    assert (intake.entries[0].paths[0] / "memory.py").read_text() == "x = 2\n"


def test_a_plain_folder_stays_plain_and_bad_metadata_is_refused_on_one_line(tmp_path, capsys):
    package(KIT / "solutions", tmp_path / "class" / "alice")
    assert read_class(tmp_path / "class", tmp_path / "scratch").layout == "plain"
    (tmp_path / "class" / "submission_metadata.yml").write_text("submission_1: [unclosed\n")
    with pytest.raises(BatchError, match="submission_metadata.yml: cannot read it"):
        read_class(tmp_path / "class", tmp_path / "scratch")
    assert grade_class(tmp_path / "class", tmp_path / "out") == 2
    assert "grader batch: " in capsys.readouterr().err


def test_similarity_reads_a_gradescope_export_one_document_per_submission(gradescope_export, tmp_path):
    from grader.classroom.similarity.documents import read_class as documents_of

    documents, unreadable = documents_of(gradescope_export, tmp_path / "scratch")
    assert sorted(d.name for d in documents) == ["alice@uni.edu", "bob@uni.edu+carol@uni.edu"] and not unreadable
