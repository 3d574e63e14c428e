"""The source scanner shared by the problems graded on their source (grader/judge/drivers/scan.py):
P3's form check folds built names and refuses dynamic access as P5's does; the package scan
reports what it cannot read."""

from __future__ import annotations

import importlib.util

import pytest

from grader.judge.drivers import scan
from grader.paths import HIDDEN

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnknownMarkWarning")  # the suite's points marks
HIDDEN_P3 = HIDDEN / "test_p3_einsum.py"


@pytest.fixture(scope="module")
def form_check():
    spec = importlib.util.spec_from_file_location("hidden_p3_einsum", HIDDEN_P3)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.FormCheck


@pytest.mark.parametrize("code, found", [
    ('def f(x):\n    return getattr(x, "per" + "mute")(0, 1)', "uses getattr(..., 'permute')"),
    ('NAME = "".join(["resh", "ape"])\ndef f(x):\n    return getattr(x, NAME)(-1)', "uses getattr(..., 'reshape')"),
    ('import importlib\ndef f(x):\n    return x', "import importlib"),
    ('import torch\ndef f(x, name):\n    return getattr(torch, name)(x)', "a name the grader cannot compute"),
])
def test_the_p3_form_check_uses_the_shared_folding_and_dynamic_rule(form_check, code, found):
    assert any(found in message for message in form_check(code).old_way_uses()), form_check(code).old_way_uses()


def test_the_p3_form_check_leaves_einops_code_alone(form_check):
    code = ("from einops import rearrange\ndef f(x, key):\n    d = getattr(x, 'shape')\n"
            "    return rearrange(x, 'a b -> b a'), getattr(key, 'name', None)")
    assert form_check(code).old_way_uses() == []


def test_a_package_module_that_does_not_parse_is_a_finding(tmp_path):
    for name, text in {"__init__": "", "optim": "from . import _broken\n", "_broken": "def (:\n"}.items():
        (tmp_path / f"{name}.py").write_text(text)
    sources, problems = scan.package(tmp_path, "optim")
    assert [s.file for s in sources] == ["optim.py", "__init__.py"]
    assert [(p.file, p.what.split(" (")[0]) for p in problems] == [("_broken.py", "does not parse")]
