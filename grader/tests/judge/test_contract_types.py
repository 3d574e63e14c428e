"""Plain ints, checked alike: a float, numpy integer or torch.Size where the contract says int fails
the public tests and the hidden suite alike."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader.submission import stage
from grader.options import GradingOptions

IN_PROCESS = GradingOptions(in_process=True, profile="ci").to_json()  # the judge runs the submission in process

KIT = Path(__file__).resolve().parents[3]

PLANTED = {  # the reference's line -> the same answer in the wrong type, and that type's name
    "contiguous_strides": ("    return tuple(reversed(strides))\n", "    return tuple(float(s) for s in reversed(strides))\n",
                           "float"),
    "transpose": ("    return tuple(new_shape), tuple(new_strides)\n",
                  "    return torch.Size(new_shape), tuple(new_strides)\n", "Size"),
    "flat_index": ("    return position\n", "    return __import__('numpy').int64(position)\n", "int64"),
}


def run(*argv: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-m", "pytest", *argv, "-q", "-p", "no:cacheprovider"], cwd=KIT, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("function", PLANTED)
def test_a_wrong_type_fails_both_suites(tmp_path, function):
    package = stage(KIT / "solutions", tmp_path)
    module = package / "strides.py"
    find, replace, wrong_type = PLANTED[function]
    source = module.read_text()
    assert source.count(find) == 1, find
    module.write_text(source.replace(find, replace))
    public = run("tests/test_p2_strides.py", "--impl", str(package.parent), "-k", function)
    assert public.returncode == 1 and "failed" in public.stdout and wrong_type in public.stdout, public.stdout[-2000:]
    hidden = run("grader/judge/hidden/test_p2_strides.py", "-p", "grader.judge.plugin", "--submission", str(package),
                 "--grading-options", IN_PROCESS, "--assert=plain", "-k", f"test_{function}")
    assert "not implemented yet" not in public.stdout + hidden.stdout, (public.stdout + hidden.stdout)[-3000:]
    assert hidden.returncode == 1 and "failed" in hidden.stdout and wrong_type in hidden.stdout, hidden.stdout[-2000:]
