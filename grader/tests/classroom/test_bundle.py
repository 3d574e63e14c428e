"""grader gradescope-bundle: the zip's run_autograder grades a submission in a fake /autograder
layout (under a temporary root) through the real judge and always leaves a valid results.json."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from grader.classroom import bundle
from grader.cli import build_parser
from grader.options import GradingOptions
from grader.paths import KIT_ROOT as KIT

GRADESCOPE_KEYS = {"score", "execution_time", "output", "tests"}


@pytest.fixture(scope="module")
def autograder_zip(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "autograder.zip"
    assert bundle.main(str(out)) == 0
    return out


def layout(root: Path, archive: Path, submission: Path | None) -> Path:
    """Gradescope's layout: the zip unpacked in source/, run_autograder copied beside it, the submission."""
    autograder = root / "autograder"
    with zipfile.ZipFile(archive) as bundled:
        bundled.extractall(autograder / "source")
    for name in ("run_autograder", "setup.sh"):
        (autograder / "source" / name).chmod(0o755)
    shutil.copyfile(autograder / "source" / "run_autograder", autograder / "run_autograder")
    (autograder / "run_autograder").chmod(0o755)
    (autograder / "submission").mkdir()
    if submission is not None:
        for path in submission.glob("*.py"):
            shutil.copyfile(path, autograder / "submission" / path.name)
    return autograder


def run_autograder(autograder: Path, **env: str) -> tuple[subprocess.CompletedProcess, dict]:
    environment = {**os.environ, "AUTOGRADER_ROOT": str(autograder), "KIT_PYTHON": sys.executable,
                   "KIT_PROFILE": "ci", "KIT_GRADER_ARGS": "--problems P1", **env}
    run = subprocess.run([str(autograder / "run_autograder")], env=environment, cwd="/", capture_output=True,
                         text=True, timeout=600)
    return run, json.loads((autograder / "results" / "results.json").read_text())


SHARED = ("kit/tests/_rules.py", "kit/tests/_by_name.py", "kit/tests/_layout_reader.py")  # the public tests' modules the grader shares


def test_bundle_holds_the_scripts_the_grader_and_what_diagnosis_replays_on(autograder_zip, tmp_path):
    with zipfile.ZipFile(autograder_zip) as bundled:
        infos = {info.filename: info for info in bundled.infolist()}
    assert {"setup.sh", "run_autograder", "config.sh", "kit/pyproject.toml", "kit/README.md",
            "kit/grader/grading/grade.py", "kit/grader/judge/hidden/pytest.ini", "kit/solutions/memory.py",
            "kit/grader/mistakes/p1_memory.toml", "kit/handout.md", *SHARED} <= set(infos)
    assert any(name.startswith("kit/grader/judge/hidden/test_p") for name in infos)
    for name in ("setup.sh", "run_autograder"):
        assert stat.S_IMODE(infos[name].external_attr >> 16) == 0o755
    private = ("kit/assignment", "kit/tests", "kit/grader/tests")
    leaked = [name for name in infos if name.startswith(private) and name not in SHARED or "__pycache__" in name]
    assert not leaked
    again = tmp_path / "again.zip"
    assert bundle.main(str(again)) == 0 and again.read_bytes() == autograder_zip.read_bytes()  # reproducible


def test_run_autograder_grades_the_submission_through_the_judge(autograder_zip, tmp_path):
    autograder = layout(tmp_path, autograder_zip, KIT / "solutions")
    run, results = run_autograder(autograder)
    assert run.returncode == 0, run.stderr
    assert GRADESCOPE_KEYS <= results.keys() and results["score"] == 12 and not results["extra_data"]["grader_error"]
    assert results["extra_data"]["problems"]["P1"] == {"name": "memory", "score": 12, "max_score": 12, "not_run": 0}
    assert all({"name", "score", "max_score", "status"} <= test.keys() for test in results["tests"])
    assert results["extra_data"]["isolation"], "the judge reports the isolation it obtained"
    assert results["extra_data"]["submission"] == str(autograder / "submission")


def test_run_autograder_names_a_known_mistake_from_the_bundled_kit(autograder_zip, tmp_path):
    # The bundled kit, not this checkout, is what run_autograder imports: a failed test's diagnosis replays
    # on the reference and the catalog the bundle holds (without them, the judge session ended abnormally).
    autograder = layout(tmp_path, autograder_zip, KIT / "solutions")
    einsum = autograder / "submission" / "einsum.py"  # the reference with one function written again, wrongly
    einsum.write_text(einsum.read_text() + "\n\n"
                      + (KIT / "grader/tests/fixtures/mistakes/p3_einsum_pairwise_transposed.py").read_text())
    run, results = run_autograder(autograder, KIT_GRADER_ARGS="--problems P3")
    assert run.returncode == 0, run.stderr
    assert not results["extra_data"]["grader_error"] and 0 < results["score"] < 12
    assert any("p3-pairwise-output-transposed" in test["output"] for test in results["tests"])


def test_a_kit_without_the_reference_names_no_mistake_and_grades_on(tmp_path, monkeypatch):
    from grader import mistakes
    from grader.judge import diagnosis

    monkeypatch.setattr(mistakes, "SOLUTIONS", tmp_path / "solutions")
    diagnosis.available.cache_clear()
    try:
        assert diagnosis.Diagnoser().diagnose("P3", diagnosis.Recording(), 10.0) == []
    finally:
        diagnosis.available.cache_clear()


def test_run_autograder_reports_an_ungradable_submission(autograder_zip, tmp_path):
    autograder = layout(tmp_path, autograder_zip, None)
    run, results = run_autograder(autograder)
    assert run.returncode == 0
    assert results["score"] == 0 and results["tests"][0]["name"] == "Autograder failed"
    assert "no assignment package" in results["extra_data"]["grader_error"]


def test_run_autograder_writes_results_even_when_the_grader_cannot_start(autograder_zip, tmp_path):
    autograder = layout(tmp_path, autograder_zip, KIT / "solutions")
    run, results = run_autograder(autograder, KIT_PYTHON=str(tmp_path / "no-python"))
    assert run.returncode == 0
    assert GRADESCOPE_KEYS <= results.keys() and results["score"] == 0
    assert results["tests"][0]["name"] == "Autograder failed" and "status 127" in results["extra_data"]["grader_error"]


def test_config_records_the_choices_and_the_environment_overrides_them(tmp_path):
    out = tmp_path / "b.zip"
    assert bundle.main(str(out), options=replace(bundle.GRADESCOPE, gpu="off", profile="ci"), torch="torch==2.13.0",
                       torch_index_url="") == 0
    config = zipfile.ZipFile(out).read("config.sh").decode()
    assert ': "${KIT_GPU=off}"' in config and ': "${KIT_TORCH=torch==2.13.0}"' in config
    shown = subprocess.run(["bash", "-c", f'. /dev/stdin <<"EOF"\n{config}EOF\necho "$KIT_GPU $KIT_PROFILE"'],
                           env={**os.environ, "KIT_GPU": "require"}, capture_output=True, text=True).stdout
    assert shown.strip() == "require ci"
    assert bundle.main(str(tmp_path / "b.txt")) == 2


def test_default_bundle_fits_gradescopes_default_container_and_pins_the_tested_torch(tmp_path):
    out = tmp_path / "b.zip"
    assert bundle.main(str(out)) == 0
    config = zipfile.ZipFile(out).read("config.sh").decode()
    assert ': "${KIT_TORCH=torch==2.13.0}"' in config  # a pinned version, not whatever is newest
    memory = int(config.split("KIT_MEMORY_MB=")[1].split("}")[0])
    budget = float(config.split("KIT_BUDGET_SECONDS=")[1].split("}")[0])
    assert memory < bundle.GRADESCOPE_MEMORY_MB and budget < bundle.GRADESCOPE_SECONDS
    assert bundle.main(str(out), options=replace(bundle.GRADESCOPE, memory_mb=300, budget_seconds=120)) == 0
    config = zipfile.ZipFile(out).read("config.sh").decode()
    assert ': "${KIT_MEMORY_MB=300}"' in config and ': "${KIT_BUDGET_SECONDS=120}"' in config


def test_a_budget_beyond_gradescopes_default_timeout_says_what_to_set_it_to(tmp_path, capsys):
    assert bundle.main(str(tmp_path / "b.zip")) == 0
    assert "Gradescope's default 768 MB and 10 minutes suffice" in capsys.readouterr().out
    assert bundle.main(str(tmp_path / "b.zip"), options=replace(bundle.GRADESCOPE, budget_seconds=5000)) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "set the autograder timeout in Gradescope's settings to at least 93 minutes" in out
    assert "10 minutes suffice" not in out


def test_setup_refuses_a_python_older_than_3_10_with_what_to_do(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python3").write_text("#!/bin/sh\nif [ \"$1\" = -V ]; then echo Python 3.8.10; exit 0; fi\nexit 1\n")
    (fake / "python3").chmod(0o755)
    source = tmp_path / "source"
    source.mkdir()
    shutil.copy(KIT / "grader" / "classroom" / "gradescope" / "setup.sh", source / "setup.sh")
    (source / "config.sh").write_text("")
    run = subprocess.run(["bash", str(source / "setup.sh")], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "KIT_VENV": str(tmp_path / "v")})
    assert run.returncode == 1 and "needs Python 3.10 or newer" in run.stderr and "Python 3.8.10" in run.stderr
    assert "Ubuntu 22.04" in run.stderr and not (tmp_path / "v").exists()


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed")
def test_bundle_scripts_pass_shellcheck():
    scripts = sorted((KIT / "grader" / "classroom" / "gradescope").glob("*.sh"))
    run = subprocess.run(["shellcheck", *map(str, scripts)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout


def test_cli_defaults_are_the_python_defaults():
    args = build_parser().parse_args(["gradescope-bundle", "x.zip"])
    for name, default in bundle.main.__kwdefaults__.items():
        assert (GradingOptions.from_args(args, bundle.GRADESCOPE) if name == "options" else getattr(args, name)) \
            == default, name


def test_the_orchestrating_process_never_imports_torch(tmp_path):
    """Only the judge and the worker load torch (about 200 MB each): in a 768 MB container a third
    copy in ``grader grade`` itself is what used to get the judge killed."""
    script = ("import sys; from grader.cli import main; "
              f"status = main(['grade', 'solutions', '--problems', 'P3', '--out', {str(tmp_path / 'r.json')!r}]); "
              "print(status, 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", script], cwd=KIT, capture_output=True, text=True, timeout=300)
    assert done.stdout.split()[-2:] == ["0", "False"], done.stdout[-2000:] + done.stderr[-2000:]
