"""grader similarity: on a class built from the kit's fixtures (``grader.bench.similarity_class``),
every planted copy is flagged and no honest pair is; pairs are judged against the class's own pairs
(honest work alike because the handout makes it so is not flagged, a disguised copy is); copies are
grouped into clusters, each on a small page of its own; the stubs never count; past folders are
compared with, not among themselves; bad input is refused on one line with nothing written."""

from __future__ import annotations

import csv
import re
import shutil
import zipfile

import numpy as np
import pytest

from grader.bench.similarity_class import DISGUISES, FIXTURES, disguise, honest_class, planted_copies
from grader.classroom.similarity import run
from grader.classroom.similarity.compare import Pair, compare
from grader.classroom.similarity.documents import Document, read_class, stubs
from grader.classroom.similarity.pairs import Criteria, to_review
from grader.cli import main as grader
from grader.paths import ASSIGNMENT, SOLUTIONS
from grader.problems import MODULES


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """The honest class, copies of the reference, and the pairs of them all (a few seconds)."""
    root = tmp_path_factory.mktemp("class")
    honest = honest_class(root)
    copies = planted_copies(root / "reference", root)
    documents, unreadable = read_class(root, tmp_path_factory.mktemp("scratch"))
    assert not unreadable and len(documents) == len(honest) + len(copies)
    return honest, copies, compare(documents, [], stubs(), jobs=2)


def test_every_planted_copy_is_flagged_and_no_honest_pair_is(measured):
    honest, copies, pairs = measured
    criteria = Criteria().calibrated(pairs)
    of_reference = {frozenset(("reference", c)): None for c in copies}
    flagged = {frozenset((p.a, p.b)) for p in pairs if criteria.flags(p)}
    assert set(of_reference) <= flagged
    honest_pairs = [p for p in pairs if p.a in honest and p.b in honest]
    assert len(honest_pairs) == len(honest) * (len(honest) - 1) // 2
    assert not [p for p in honest_pairs if criteria.flags(p)]
    # the disguises worked: each copy differs from the reference, and no copy scores a perfect 1
    assert all(p.score < 1 for p in pairs if frozenset((p.a, p.b)) in of_reference)


def test_the_lines_criterion_is_what_spares_small_honest_look_alikes(measured):
    """Short fixtures written alike (one-line functions, one author's variations) score high on share alone."""
    honest, _, pairs = measured
    assert [p for p in pairs if p.a in honest and p.b in honest and p.score >= Criteria.threshold]


def test_each_disguise_changes_the_text_but_keeps_it_python():
    source = (SOLUTIONS / "optim.py").read_text()
    for name in DISGUISES:
        changed = disguise(source, (name,))
        compile(changed, name, "exec")
        assert changed != disguise(source, ())
    renamed = disguise(source, ("renamed",))
    assert "class SGD" not in renamed and re.search(r"def my_\w+_\d+\(", renamed)


def test_the_stubs_never_count(tmp_path):
    """Two submissions that are the stubs plus different work look alike only without the stubs as
    boilerplate."""
    alike = [Document(name, stubs().text + (FIXTURES / "alternatives" / fixture).read_text())
             for name, fixture in (("alice", "p1_memory.py"), ("bob", "p6_data.py"))]
    (pair,) = compare(alike, [], stubs())
    assert pair.score < 0.1 and pair.lines <= 3  # a shared idiom of a few lines, nothing of the stubs
    (unfiltered,) = compare(alike, [], Document("nothing", ""))
    assert unfiltered.score > 0.9


def _submission(root, name, source=SOLUTIONS):
    shutil.copytree(source, root / name / "assignment", ignore=shutil.ignore_patterns("__pycache__"))


def test_past_folders_are_compared_with_not_among_themselves(tmp_path, capsys):
    term, past = tmp_path / "class", tmp_path / "past"
    _submission(term, "alice")
    _submission(term, "bob", ASSIGNMENT)
    _submission(past, "old1")
    _submission(past, "old2")
    assert grader(["similarity", str(term), "--out", str(tmp_path / "out"), "--past", str(past)]) == 0
    rows = list(csv.DictReader(open(tmp_path / "out" / "similarity.csv")))
    assert {(r["a"], r["b"]) for r in rows} == {("alice", "bob"), ("alice", "past/past/old1"),
                                              ("alice", "past/past/old2"), ("bob", "past/past/old1"),
                                              ("bob", "past/past/old2")}
    assert [(r.a, r.b) for r in to_review(tmp_path / "out")] == [("alice", "past/past/old1"), ("alice", "past/past/old2")]
    assert "2 submissions compared, 2 pairs to review" in capsys.readouterr().out


def test_unreadable_submissions_are_listed_and_the_rest_compared(tmp_path, capsys):
    term = tmp_path / "class"
    _submission(term, "alice")
    _submission(term, "bob")
    (term / "carol.zip").write_bytes(b"not a zip")
    (term / "dave" / "assignment").mkdir(parents=True)
    (term / "dave" / "assignment" / "memory.py").write_bytes(b"\xff\xfe not utf-8")
    count, flagged, unreadable = run(term, tmp_path / "out", past=[], criteria=Criteria())
    assert (count, flagged) == (2, 1)
    assert set(unreadable) == {"carol", "dave"} and "not a readable zip" in unreadable["carol"]
    page = (tmp_path / "out" / "similarity.html").read_text()
    assert "carol" in page and 'href="clusters/cluster-1.html"' in page
    assert "<mark>" in (tmp_path / "out" / "clusters" / "cluster-1.html").read_text()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # self-contained: nothing fetched


def _corrupt_archive(path):
    """A class archive whose one member fails its checksum."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("alice/assignment/memory.py", "x = 1\n")
    data = path.read_bytes()
    path.write_bytes(data.replace(b"x = 1", b"y = 2", 1))


@pytest.mark.parametrize("make, args, message", [
    (lambda root: root.mkdir(), [], "0 readable submissions, nothing to compare"),
    (lambda root: root.with_suffix(".zip").write_bytes(b"PK broken"), [], "expected a folder of submissions"),
    (lambda root: _corrupt_archive(root.with_suffix(".zip")), [], "class.zip: not a readable archive (Bad CRC-32"),
    (lambda root: root.mkdir(), ["--threshold", "1.5"], "--threshold: must be from 0 to 1, got 1.5"),
    (lambda root: root.mkdir(), ["--past", "/nonexistent"], "--past: no such folder: /nonexistent"),
])
def test_bad_input_is_refused_on_one_line_and_nothing_is_written(tmp_path, capsys, make, args, message):
    root = tmp_path / "class"
    make(root)
    target = root if root.exists() else root.with_suffix(".zip")
    assert grader(["similarity", str(target), "--out", str(tmp_path / "out"), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def _pair(a: str, b: str, score: float, lines: int = 300) -> Pair:
    return Pair(a, b, score, score, lines, (np.zeros((2, 0), int), np.zeros((2, 0), int)))


def test_honest_work_alike_by_the_handout_is_not_flagged_and_a_disguised_copy_is():
    """Three independent honest submissions (0.57 to 0.59 alike, as this handout makes them) and a disguised
    copy of the first (0.85): judged against the class, only the copy is to review."""
    pairs = [_pair("h1", "h2", 0.57), _pair("h1", "h3", 0.58), _pair("h2", "h3", 0.59), _pair("h1", "copy", 0.85),
             _pair("h2", "copy", 0.55), _pair("h3", "copy", 0.56)]
    calibrated = Criteria().calibrated(pairs)
    assert [(p.a, p.b) for p in pairs if calibrated.flags(p)] == [("h1", "copy")]
    assert len([p for p in pairs if Criteria().flags(p)]) == 6  # a fixed threshold alone flags every pair


def test_a_class_made_of_copies_cannot_hide_them_in_its_own_median():
    identical = [_pair("a", "b", 1.0), _pair("a", "c", 1.0), _pair("b", "c", 0.97)]
    calibrated = Criteria().calibrated(identical)
    assert all(map(calibrated.flags, identical)) and calibrated.clusters(identical) == [["a", "b", "c"]]
    assert not any(map(Criteria(ceiling=1.0).calibrated(identical).flags, identical))  # the ceiling is what flags them


def test_five_copies_are_one_cluster_on_one_small_page(tmp_path, capsys):
    term = tmp_path / "class"
    for name in ("c1", "c2", "c3", "c4", "c5"):
        _submission(term, name)
    for name in ("s1", "s2"):
        _submission(term, name, ASSIGNMENT)
    assert grader(["similarity", str(term), "--out", str(tmp_path / "out")]) == 0
    assert "10 pairs to review" in capsys.readouterr().out
    assert {r.cluster for r in to_review(tmp_path / "out")} == {1}
    page = (tmp_path / "out" / "similarity.html").read_text()
    assert "<td>1</td><td>c1, c2, c3, c4, c5</td>" in page and "<mark>" not in page
    cluster = (tmp_path / "out" / "clusters" / "cluster-1.html").read_text()
    assert cluster.count("<h2>") == 4  # the pairs that join five submissions, not all ten
    assert len(cluster.encode()) < 400_000 and "minmax(0, 1fr)" in cluster and "pre-wrap" in cluster
    assert not (tmp_path / "out" / "clusters" / "cluster-2.html").exists()


def _whole(texts: dict[str, str]) -> str:
    return "\n".join(f"# {module}.py\n{text}" for module, text in texts.items())


def test_three_independent_honest_submissions_and_a_disguised_copy_only_the_copy_is_flagged():
    """The reference, the alternatives and the lenient alternatives (each written into the stubs), and the
    reference disguised every way at once: compared for real, only the copy and its original are to review."""
    modules = {f"p{i}_{m}": m for i, m in enumerate(MODULES, 1)}

    def alternative(suffix: str) -> str:
        return _whole({m: (ASSIGNMENT / f"{m}.py").read_text() + "\n\n"
                       + (FIXTURES / "alternatives" / f"{stem}{suffix}.py").read_text() for stem, m in modules.items()})

    reference = {m: (SOLUTIONS / f"{m}.py").read_text() for m in modules.values()}
    documents = [Document("reference", _whole(reference)), Document("alternative", alternative("")),
                 Document("lenient", alternative("_lenient")),
                 Document("copy", _whole({m: disguise(text, DISGUISES) for m, text in reference.items()}))]
    pairs = compare(documents, [], stubs(), jobs=2)
    criteria = Criteria().calibrated(pairs)
    assert [(p.a, p.b) for p in pairs if criteria.flags(p)] == [("reference", "copy")]
    assert criteria.clusters(pairs) == [["copy", "reference"]]
