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
    ('import pydoc\ndef f(x):\n    return pydoc.locate("torch.Tensor.per" + "mute")(x, 1, 0)', "import pydoc"),
    ('from torch._utils import _import_dotted_name as d\ndef f(x):\n    return d("torch.mm")(x, x)',
     "from torch._utils import ..."),
    ('import cProfile\ndef f(x, text):\n    cProfile.Profile().runctx(text, {"x": x}, {})', "import cProfile"),
    ('import torch\ndef f(b):\n    return torch.load(b, weights_only=False)', "unpickles any class it names"),
])
def test_the_p3_form_check_uses_the_shared_folding_and_dynamic_rule(form_check, code, found):
    assert any(found in message for message in form_check(code).old_way_uses()), form_check(code).old_way_uses()


def test_the_p3_form_check_leaves_einops_code_alone(form_check):
    code = ("from einops import rearrange\ndef f(x, key):\n    d = getattr(x, 'shape')\n"
            "    return rearrange(x, 'a b -> b a'), getattr(key, 'name', None)")
    assert form_check(code).old_way_uses() == []


def _einsum_package(folder, einsum: str, **modules: str):
    for name, text in {"__init__": "", "einsum": einsum, **modules}.items():
        (folder / f"{name}.py").write_text(text)
    return folder


def test_the_p3_form_check_reads_the_modules_einsum_imports(form_check, tmp_path):
    folder = _einsum_package(tmp_path, "from einops import rearrange\nfrom ._old import turned\n"
                                       "def channels_first(x):\n    return rearrange(turned(x), 'a b -> b a')\n",
                             _old="def turned(x):\n    return x.transpose(0, 1)\n",
                             __init__="from . import memory\n", memory="def f(x):\n    return x.view(-1)\n")
    assert form_check.of(folder).old_way_uses() == [
        "_old.py line 2, in turned: uses .transpose; use einops.rearrange"]  # __init__ and memory: not reached


def test_the_p3_form_check_reads_init_where_einsum_takes_names_from_it(form_check, tmp_path):
    folder = _einsum_package(tmp_path, "from . import turned\n",
                             __init__="def turned(x):\n    return x.mT\n")
    assert form_check.of(folder).old_way_uses() == ["__init__.py line 2, in turned: uses .mT; use einops.rearrange"]


@pytest.mark.parametrize("call, counts", [
    ("rearrange(x, 'a b -> b a')", True),
    ("reduce(x, '... h -> ...', 'sum')", True),
    ("einsum(x, x, 'a b, b c -> a c')", True),
    ("rearrange(x, pattern='b h w c -> b c h w')", True),
    ("rearrange(x, '... -> ...')", False),
    ("reduce(x, 'a  b ->a b', 'sum')", False),
    ("einsum(x, '... -> ...')", False),
    ("rearrange(x, pattern)", False),  # a pattern the grader cannot read
])
def test_an_identity_pattern_is_no_einops_rewrite(form_check, call, counts):
    code = f"from einops import einsum, rearrange, reduce\ndef channels_first(x, pattern='a -> a'):\n    return {call}\n"
    missing = [m for m in form_check(code).without_einops() if m.startswith("einsum.channels_first ")]
    assert (not missing) == counts, missing


def test_a_package_module_that_does_not_parse_is_a_finding(tmp_path):
    for name, text in {"__init__": "", "optim": "from . import _broken\n", "_broken": "def (:\n"}.items():
        (tmp_path / f"{name}.py").write_text(text)
    sources, problems = scan.package(tmp_path, "optim")
    assert [s.file for s in sources] == ["optim.py", "__init__.py"]
    assert [(p.file, p.what.split(" (")[0]) for p in problems] == [("_broken.py", "does not parse")]
