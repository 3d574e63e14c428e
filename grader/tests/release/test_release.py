"""The student release: complete, verified, leak-free, and its tests fail (not error) on the stubs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader import mistakes
from grader.release import ReleaseError, build
from grader.release.assert_no_leak import find_leaks
from grader.release.assert_portable import find_posix_only_imports

KIT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("rel") / "student")


def test_release_holds_the_student_files_and_nothing_else(release):
    names = {p.name for p in release.iterdir()}
    assert {"assignment", "tests", "handout.md", "pyproject.toml", "README.md"} <= names
    assert not {"solutions", "grader"} & names
    assert not list(release.rglob("test_p*_*.py")) or all(p.parent.name == "tests" for p in release.rglob("test_p*"))
    assert find_leaks(KIT, release) == []


def test_a_leaked_solution_line_is_caught(release, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(release, copy)
    solution = (KIT / "solutions" / "memory.py").read_text()
    region = solution.split("# BEGIN SOLUTION", 2)[2].split("# END SOLUTION", 1)[0]
    secret = max(region.splitlines(), key=len)
    with open(copy / "assignment" / "strides.py", "a") as stream:
        stream.write(f"\n# {secret.strip()}\n" if secret.strip().startswith("#") else f"\n{secret.strip()}\n")
    assert any("secret line" in p or "not the generated stub" in p for p in find_leaks(KIT, copy))


def test_a_leaked_hidden_suite_is_caught(release, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(release, copy)
    hidden = next((KIT / "grader" / "judge" / "hidden").glob("test_p*_*.py"))
    shutil.copyfile(hidden, copy / "tests" / f"extra_{hidden.name}")
    assert find_leaks(KIT, copy)


@pytest.mark.parametrize("source", ["mutant", "fixture"])
def test_a_leaked_known_mistake_is_caught(release, tmp_path, source):
    copy = tmp_path / "copy"
    shutil.copytree(release, copy)
    if source == "mutant":
        text = next(m.replace for m in mistakes.load() if m.id == "p1-subnormal-as-normal")
    else:
        text = (KIT / "grader" / "tests" / "fixtures" / "mistakes" / "p4_flops_days_in_hours.py").read_text()
    with open(copy / "tests" / "test_p1_memory.py", "a") as stream:
        stream.write("\n" + max(text.splitlines(), key=len).strip() + "\n")
    assert any("secret line" in p for p in find_leaks(KIT, copy))


def test_release_refuses_a_non_empty_target(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(ReleaseError):
        build(tmp_path)
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_public_tests_in_the_release_all_fail_on_the_stubs(release):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([sys.executable, "-m", "pytest", "tests", "-q", "-p", "no:cacheprovider", "-x", "--co"],
                         cwd=release, env=env, capture_output=True, text=True, timeout=300)
    collected = int(re.search(r"(\d+) tests? collected", run.stdout).group(1))
    run = subprocess.run([sys.executable, "-m", "pytest", "tests", "-q", "-p", "no:cacheprovider"],
                         cwd=release, env=env, capture_output=True, text=True, timeout=600)
    lines = run.stdout.strip().splitlines()
    summary = next(line for line in reversed(lines) if re.search(r" in [\d.]+s", line))
    assert run.returncode == 1, run.stdout[-2000:]
    counts = {kind: int(m.group(1)) if (m := re.search(rf"(\d+) {kind}", summary)) else 0
              for kind in ("failed", "not implemented", "skipped")}
    assert "error" not in summary and "passed" not in summary, summary
    assert sum(counts.values()) == collected and counts["not implemented"] > 0.9 * collected, summary
    # Short: every stub failure is counted, not printed; no chained copies; the table comes last.
    assert len(lines) < 100 and "During handling" not in run.stdout, f"{len(lines)} lines:\n{run.stdout[-3000:]}"
    table = lines.index(next(line for line in lines if "public tests per problem" in line))
    assert lines.index(summary) < table and lines[-1].startswith("Passing the public tests"), run.stdout[-2000:]
    assert "handout.md sections): memory.bytes_per_element" in run.stdout


def test_setup_offers_the_cpu_wheel_and_names_the_checked_versions(release):
    pin = re.search(r'"torch>=(\d+\.\d+),<=(\d+\.\d+)\.\d+"', (release / "pyproject.toml").read_text())
    assert pin, "the release pins torch to a checked range"
    floor = re.search(r'"torch>=([\d.]+)"', (KIT / "pyproject.toml").read_text())
    assert floor and floor.group(1) == pin.group(1), "the kit and the release name the same torch floor"
    for name in ("README.md", "handout.md"):
        text = (release / name).read_text()
        assert "uv sync && uv run python -c \"import torch; print(torch.__version__)\"" in text, name
        assert (f'pip install "torch>={pin.group(1)},<={pin.group(2)}.0" --index-url https://download.pytorch.org/whl/cpu'
                in text), name
        assert "--extra-index-url" not in text, name  # an unreachable extra index costs minutes of retries
        assert f"Python 3.10 to 3.13 and torch {pin.group(1)} to {pin.group(2)}" in text, name
    dependencies = re.findall(r'^    "([a-z]+)', (release / "pyproject.toml").read_text(), flags=re.MULTILINE)
    assert sorted(dependencies) == ["einops", "hypothesis", "jaxtyping", "numpy", "pytest", "torch"]


def test_release_imports_nothing_windows_lacks(release, tmp_path):
    assert find_posix_only_imports(release) == []
    copy = tmp_path / "copy"
    shutil.copytree(release, copy)
    conftest = copy / "tests" / "conftest.py"
    conftest.write_text(conftest.read_text() + "\n\ndef peak():\n    import resource.foo\n"
                        "    return importlib.import_module('fcntl')\n\n\n"
                        "@pytest.mark.skipif(sys.platform == 'win32', reason='POSIX')\n"
                        "def test_posix_only():\n    import pwd\n")
    assert find_posix_only_imports(copy) == ["tests/conftest.py: fcntl", "tests/conftest.py: resource"]


def test_a_problem_marker_selects_only_public_tests():
    """``-m p7`` from the kit's root selects P7's public tests, not a kit test whose file is named alike
    (``grader/tests/judge/test_p7_files.py``); the table counts the same files."""
    run = subprocess.run([sys.executable, "-m", "pytest", "tests", "grader/tests/judge/test_p7_files.py", "--impl",
                          "solutions", "-m", "p7", "--co", "-q", "-p", "no:cacheprovider"],
                         cwd=KIT, capture_output=True, text=True, timeout=300)
    selected = [line for line in run.stdout.splitlines() if "::" in line]
    assert selected and all(line.startswith("tests/test_p7_checkpoint.py::") for line in selected), run.stdout[-2000:]
