"""The source scanner shared by the problems graded on their source (grader/judge/drivers/scan.py) and P3's
form check (tests/_einops_reader.py, with scan's dynamic rule): an allowlist over the code the nine functions
reach, a form-einops point only for a value an einops rewrite produced; the package scan reports what it
cannot read."""

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


def _einsum_package(folder, einsum: str, **modules: str):
    for name, text in {"__init__": "", "einsum": einsum, **modules}.items():
        (folder / f"{name}.py").write_text(text)
    return folder


def _channels_first(folder, body: str, **modules: str):
    """A package whose einsum.py defines channels_first(x) with ``body``."""
    code = ("import math\nimport torch\nfrom einops import einsum, rearrange, reduce\n"
            f"def channels_first(x, pattern='a -> a'):\n{body}")
    return _einsum_package(folder, code, **modules)


@pytest.mark.parametrize("body, found", [
    ('    return getattr(x, "per" + "mute")(0, 1)\n', "calls getattr(..., 'permute')"),
    ('    import importlib\n    return x\n', "import importlib"),
    ('    return getattr(torch, pattern)(x)\n', "a name the grader cannot compute"),
    ('    from torch._utils import _import_dotted_name as d\n    return d("torch.mm")(x, x)\n',
     "from torch._utils import ..."),
    ('    import torch\n    return torch.load(x, weights_only=False)\n', "unpickles any class it names"),
])
def test_the_p3_form_check_refuses_dynamic_access(form_check, tmp_path, body, found):
    uses = form_check.of(_channels_first(tmp_path, body)).old_way_uses()
    assert any(found in message for message in uses), uses


@pytest.mark.parametrize("body, found", [  # operations no list names: refused because they are not allowed
    ("    return torch.inner(x, x)\n", "calls torch.inner"),
    ("    return torch.nn.functional.linear(x, x)\n", "calls torch.nn.functional.linear"),
    ("    return torch.stack(x.unbind(-1), 1)\n", "calls .unbind() on x"),
    ("    return x[..., None, :]\n", "indexes a value that may be a tensor"),
    ("    return x.new_zeros(3)\n", "calls .new_zeros() on x"),
    ("    return x @ x\n", "the @ operator"),
    ("    y = rearrange(x, 'a b -> b a')\n    return y[0]\n", "indexes a value that may be a tensor"),
    ("    a, b = rearrange(x, '(two h) -> two h', two=2)\n    return a + b\n", "iterates over or unpacks a tensor"),
    ("    return sum(x)\n", "calls sum()"),
    ("    return x.T\n", "reads .T of x"),
])
def test_the_p3_form_check_is_an_allowlist(form_check, tmp_path, body, found):
    uses = form_check.of(_channels_first(tmp_path, body)).old_way_uses()
    assert any(found in message for message in uses), uses
    assert "allowed: einops.einsum" in uses[-1]


def test_the_p3_form_check_leaves_einops_code_alone(form_check, tmp_path):
    body = ("    b, h, w, c = x.shape\n    d = x.shape[-1] * len(x.shape[:2]) + x.size(0) + x.dim() + x.numel()\n"
            "    if not isinstance(d, int) or x.ndim != 4:\n        raise ValueError(f'{x.dtype} {x.device}')\n"
            "    return rearrange(x, 'b h w c -> b c h w') / math.sqrt(max(1, c))\n")
    check = form_check.of(_channels_first(tmp_path, body))
    assert check.old_way_uses() == []
    assert not [m for m in check.without_einops() if m.startswith("einsum.channels_first ")]


def test_the_p3_form_check_reads_the_modules_the_functions_reach(form_check, tmp_path):
    folder = _einsum_package(tmp_path, "from einops import rearrange\nfrom ._old import turned\n"
                                       "def channels_first(x):\n    return rearrange(turned(x), 'a b -> b a')\n",
                             _old="def turned(x):\n    return x.transpose(0, 1)\n",
                             __init__="from . import memory\n", memory="def f(x):\n    return x.view(-1)\n")
    uses = form_check.of(folder).old_way_uses()
    assert uses[:-1] == ["_old.py line 2, in turned: calls .transpose() on x"], uses  # memory.f: not reached


def test_the_p3_form_check_reads_init_where_einsum_takes_names_from_it(form_check, tmp_path):
    folder = _einsum_package(tmp_path, "from . import turned\ndef channels_first(x):\n    return turned(x)\n",
                             __init__="def turned(x):\n    return x.mT\n")
    assert form_check.of(folder).old_way_uses()[:-1] == ["__init__.py line 2, in turned: reads .mT of x"]


def test_the_p3_form_check_reads_what_init_runs(form_check, tmp_path):
    folder = _einsum_package(tmp_path, "from einops import rearrange\n"
                                       "def channels_first(x):\n    return rearrange(x, 'b h w c -> b c h w')\n",
                             __init__="import torch\nfrom . import einsum as _e\n"
                                      "def _old(x):\n    return torch.movedim(x, -1, 1)\n_e.channels_first = _old\n")
    check = form_check.of(folder)
    assert "__init__.py line 5: assigns to _e.channels_first (assign to names only)" in check.old_way_uses()
    assert any(m.startswith("einsum.channels_first ") for m in check.without_einops())


@pytest.mark.parametrize("body, counts", [
    ("    return rearrange(x, 'a b -> b a')\n", True),
    ("    return reduce(x, '... h -> ...', 'sum')\n", True),
    ("    return einsum(x, x, 'a b, b c -> a c')\n", True),
    ("    return rearrange(x, pattern='b h w c -> b c h w')\n", True),
    ("    y = rearrange(x, 'b h w c -> b c h w')\n    return y * 2\n", True),
    ("    return rearrange(x, '... -> ...')\n", False),
    ("    return reduce(x, 'a  b ->a b', 'sum')\n", False),
    ("    return einsum(x, '... -> ...')\n", False),
    ("    return rearrange(x, pattern)\n", False),  # a pattern the grader cannot read
    ("    return rearrange(x, '... -> ... ()')\n", False),  # a unit axis added: an identity
    ("    return rearrange(rearrange(torch.inner(x, x), '... -> ... ()'), '... () -> ...')\n", False),
    ("    rearrange(x, 'a b -> b a')\n    return torch.inner(x, x)\n", False),  # a dead call
    ("    y = torch.inner(x, x)\n    return rearrange(y, 'a b -> b a')\n", False),  # a value computed another way
])
def test_the_returned_value_must_be_an_einops_rewrite(form_check, tmp_path, body, counts):
    missing = [m for m in form_check.of(_channels_first(tmp_path, body)).without_einops()
               if m.startswith("einsum.channels_first ")]
    assert (not missing) == counts, missing


def test_a_package_module_that_does_not_parse_is_a_finding(tmp_path):
    for name, text in {"__init__": "", "optim": "from . import _broken\n", "_broken": "def (:\n"}.items():
        (tmp_path / f"{name}.py").write_text(text)
    sources, problems = scan.package(tmp_path, "optim")
    assert [s.file for s in sources] == ["optim.py", "__init__.py"]
    assert [(p.file, p.what.split(" (")[0]) for p in problems] == [("_broken.py", "does not parse")]
