"""A class graded in two passes: ``--gpu off`` for every test but the GPU tests, ``--gpu only`` for
the GPU tests alone, combined by ``grader gradebook`` into one record per student.

Without a GPU here the GPU pass runs with CUDA forced "available" in the judge (a sitecustomize
on PYTHONPATH): its GPU tests then really run and really fail (no CUDA), as they do in a whole
grading forced the same way, so that the merge is checked against real verdicts of both kinds.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
import torch

from grader.classroom import batch, gradebook
from grader.grading import grade as grading
from grader.judge import plugin
from grader.classroom.gradebook.records import GradebookError, combine, grading_of, read_record
from grader.options import GradingOptions
from grader.paths import KIT_ROOT as KIT
from grader.grading.results import GradingResult, TestResult, write_json_atomic

FORCE_CUDA = "import torch\ntorch.cuda.is_available = lambda: True\n"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without CUDA")
def test_gpu_only_is_refused_at_once_without_cuda(tmp_path, capsys):
    with pytest.raises(grading.GradingError, match="--gpu only: no CUDA device"):
        grading.grade(KIT / "solutions", gpu="only")
    assert batch.main(str(KIT / "solutions"), out=tmp_path / "out", options=GradingOptions(gpu="only")) == 2
    assert "--gpu only: no CUDA device" in capsys.readouterr().err and not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def passes(tmp_path_factory) -> dict[str, Path]:
    """The reference and a P4 mutant graded (P4, ci profile) three ways: CPU pass, GPU pass, whole."""
    root = tmp_path_factory.mktemp("passes")
    mutant = tomllib.loads((KIT / "grader" / "mistakes" / "p4_flops.toml").read_text())["mutant"][0]
    for student, edit in (("reference", None), ("mutant", mutant)):
        folder = root / "class" / student / "assignment"
        folder.mkdir(parents=True)
        for path in (KIT / "solutions").glob("*.py"):
            text = path.read_text()
            folder.joinpath(path.name).write_text(text.replace(edit["find"], edit["replace"], 1)
                                                  if edit and path.name == "flops.py" else text)
    (root / "force").mkdir()
    (root / "force" / "sitecustomize.py").write_text(FORCE_CUDA)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", str(root / "force"))
        patch.setattr(batch, "_cuda_available", lambda: True)
        for mode in ("off", "only", "auto"):
            assert batch.main(str(root / "class"), out=root / mode, jobs=2,  # P4's paused calls leave a core idle
                              options=GradingOptions(gpu=mode, problems=("P4",), profile="ci")) == 0
    return {mode: root / mode for mode in ("off", "only", "auto")}


def verdicts(records) -> dict[str, dict[str, str]]:
    return {r.student: {t.nodeid: t.status for t in r.tests} for r in records}


@pytest.mark.slow
def test_two_passes_merge_into_the_whole_grading_test_by_test(passes):
    merged, gaps, _ = gradebook.collect([passes["off"], passes["only"]])
    whole, _, _ = gradebook.collect([passes["auto"]])
    assert not gaps and verdicts(merged) == verdicts(whole)
    mutant, reference = merged
    gpu = [t for t in reference.tests if t.gpu]
    assert gpu and all(t.status == "failed" for t in gpu)  # really run (and failed: no CUDA here)
    assert all(t.status == "passed" for t in reference.tests if not t.gpu)
    assert any(t.status == "failed" for t in mutant.tests if not t.gpu)
    for mine, theirs in zip(merged, whole):
        assert (mine.total, mine.problems, mine.provisional, mine.status) == (
            theirs.total, theirs.problems, theirs.provisional, theirs.status)
        assert not mine.provisional


@pytest.mark.slow
def test_each_pass_alone_runs_only_its_own_tests(passes):
    cpu, gpu = (read_record(passes[mode] / "results" / "reference.json") for mode in ("off", "only"))
    assert {t.status for t in cpu.tests if t.gpu} == {"not_run"} and cpu.provisional and not cpu.gpu_pass
    assert {t.status for t in gpu.tests if not t.gpu} == {"not_run"} and gpu.gpu_pass
    assert {t.message for t in gpu.tests if not t.gpu} == {plugin.NOT_RUN_CPU}


@pytest.mark.slow
def test_a_gpu_pass_without_its_cpu_pass_is_an_error_row(passes):
    (record,) = [r for r in gradebook.collect([passes["only"]])[0] if r.student == "reference"]
    assert record.status == "error" and record.total == 0 and "CPU pass has no result" in record.reason


def _pass(result: Path, tmp: Path, name: str, edit) -> Path:
    """A copy of a results file with ``edit(data)`` applied, in a folder of its own."""
    data = json.loads(result.read_text())
    edit(data)
    path = tmp / name / "results" / result.name
    write_json_atomic(path, data)
    return path.parents[1]


@pytest.mark.parametrize("edit, why", [
    (lambda d: d["extra_data"]["options"].update(seed=1), "different kit versions or options"),
    (lambda d: d["extra_data"]["options"].update(budget_seconds=60.0), "different kit versions or options"),
    (lambda d: d["extra_data"].update(kit_version="0.0.0"), "different kit versions or options"),
    (lambda d: d["extra_data"]["batch"].update(content_hash="sha256:other"), "different submissions"),
])
@pytest.mark.slow
def test_passes_that_cannot_be_merged_are_refused(passes, tmp_path, edit, why):
    gpu = _pass(passes["only"] / "results" / "reference.json", tmp_path, "gpu", edit)
    with pytest.raises(GradebookError, match=why):
        gradebook.collect([passes["off"], gpu])


@pytest.mark.slow
def test_a_test_both_passes_ran_with_different_verdicts_is_refused(passes, tmp_path):
    def flip(data):
        test = next(t for t in data["tests"] if t["extra_data"]["gpu"])
        test["extra_data"]["status"], test["score"] = "passed", test["max_score"]
    whole = _pass(passes["auto"] / "results" / "reference.json", tmp_path, "whole", flip)
    with pytest.raises(GradebookError, match="both passes ran .* with different verdicts"):
        gradebook.collect([whole, passes["only"]])
    assert gradebook.collect([passes["auto"], passes["only"]])[0]  # the same verdicts: merged


def test_an_error_in_either_pass_makes_an_error_row():
    test = TestResult("P4", "flops", "t", 1.0, "passed", nodeid="a")
    gpu = TestResult("P4", "flops", "g", 1.0, "error", gpu=True, nodeid="b")
    cpu_tests = (test, TestResult("P4", "flops", "g", 1.0, "not_run", gpu=True, nodeid="b"))
    main = read_like(cpu_tests, "")
    other = read_like((TestResult("P4", "flops", "t", 1.0, "not_run", nodeid="a"), gpu), "could not judge g",
                      gpu_pass=True)
    merged = combine(main, other)
    assert merged.status == "error" and merged.total == 0 and "GPU pass: could not judge g" in merged.reason


def read_like(tests, reason: str, gpu_pass: bool = False):
    from grader.classroom.gradebook.records import Record, _scores

    return Record(student="s", status="error" if reason else "graded", graded_at="", reason=reason, tests=tests,
                  gpu_pass=gpu_pass, **_scores(tests, not reason))


def test_shard_gaps_are_counted_per_pass(tmp_path):
    result = GradingResult(tests=(TestResult("P1", "memory", "t", 1.0, "passed"),))
    for folder, shard, gpu in (("shard-1", "1/2", "off"), ("shard-2", "2/2", "off"), ("gpu-shard-1", "1/2", "only")):
        write_json_atomic(tmp_path / folder / "results" / f"{folder}.json", result.to_gradescope_dict())
        write_json_atomic(tmp_path / folder / "batch.json", {"students": [folder], "shard": shard,
                                                              "options": {"gpu": gpu}})
    assert gradebook.collect([tmp_path])[1] == ["GPU pass shard 2/2"]


def test_the_pass_of_a_result_is_its_gpu_mode():
    data = GradingResult(tests=(), options={"gpu": "only", "seed": 3}).to_gradescope_dict()
    mode, options = grading_of(data)
    assert mode == "only" and json.loads(options)["seed"] == 3 and "gpu" not in json.loads(options)
