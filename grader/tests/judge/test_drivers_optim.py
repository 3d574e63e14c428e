"""P5's judge-side driver (grader/judge/drivers/optim.py, optim_source.py): the source scan follows computed names and
the package's own imports,
mismatch messages locate the difference, the judge-side adapter returns copies as the wire does, and copydetect
comes without matplotlib's pyplot."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from grader.judge.drivers.sides import Local
from grader.judge.drivers import optim as drive
from grader.judge.drivers import optim_source

KIT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("code", [
    'getattr(torch.optim, "S" + "GD")',
    'NAME = "Ada" + "grad"\nOTHER = NAME\ngetattr(torch.optim, OTHER)',
    'getattr(torch.optim, f"{\'S\'}GD")',
    'getattr(torch.optim, "DGS"[::-1])',
    'getattr(torch.optim, "sgd".upper())',
    'getattr(torch, "_foreach_" + "add_")',
    'importlib.import_module("torch.optim." + "sgd")',
    '__import__(".".join(["torch", "optim", "adagrad"]))',
    'importlib.reload(module)',
    'vars(torch.optim)["S" + "GD"]',
    'sys.modules["torch.optim.sgd"]',
    'eval("torch.optim." + "SGD")',
    'from torch.optim.sgd import sgd',
    'import torch.optim.adagrad',
    'torch.optim.SGD(params)',
    'torch._foreach_mul_(params, 0.9)',
    # any torch.optim optimizer but Optimizer, by class, alias or type(...)
    'SGD = type("SGD", (torch.optim.SGD,), {"__module__": "torch.optim.sgd"})',
    'from torch.optim import Adam as Plain\nclass SGD(Plain): pass',
    'import torch.optim as o\nclass AdaGrad(o.Adagrad): pass',
    # dynamic ways of reaching code, whatever they reach
    'name = "S"\nname = name + "GD"\ngetattr(torch.optim, name)',  # assigned twice: not a constant
    'getattr(torch.optim, "".join(map(chr, [83, 71, 68])))',
    'import torch.optim as m\nx = m\ngetattr(x, key)',
    'functools.reduce(getattr, ["optim", key], torch)',
    'import gc\n[o for o in gc.get_objects() if type(o).__name__ == "Dispatcher"]',
    'import inspect',
    'from importlib import import_module',
    'import ctypes',
    'sys._getframe(1).f_locals',
    'torch.optim.Optimizer.step.__closure__[0].cell_contents',
    'torch.optim.Optimizer.__subclasses__()',
    'operator.attrgetter(key)(torch.optim)',
    'torch.optim.__dict__[key]',
    'from sys import modules',
    'pickle.loads(payload)',
])
def test_the_scan_finds_delegation_through_computed_names(code):
    assert optim_source.shortcuts(code), code


@pytest.mark.parametrize("code", [
    'getattr(group, "lr")',
    'def f(self, group, key):\n    return getattr(self, key), getattr(group["params"][0], key), self.__dict__',
    'class SGD(torch.optim.Optimizer):\n    """Unlike torch.optim.SGD, mine."""',
    'from torch.optim import Optimizer\nclass AdaGrad(Optimizer):\n    @torch.no_grad()\n    def step(self):\n'
    '        s.addcmul_(g, g)\n        p.addcdiv_(g, s.sqrt().add_(eps), value=-lr)',
    'from . import _updates\nfrom ._updates import momentum_step',
    'class SGD(torch.optim.Optimizer):\n    def step(self):\n        self.state[p]["sum"] = torch.zeros_like(p)\n'
    '        return self.__dict__.setdefault("extra", {}), getattr(self, key)',  # self stays self
])
def test_the_scan_leaves_ordinary_code_alone(code):
    assert optim_source.shortcuts(code) == []


def test_a_finding_names_the_file_and_the_line():
    found = optim_source.shortcuts('import torch\n\nclass SGD(torch.optim.SGD):\n    pass\n', "helper.py")
    assert [str(f) for f in found] == ["helper.py line 3: torch.optim.SGD"]


def _package(folder: Path, **modules: str) -> Path:
    folder.mkdir()
    for name, text in {"__init__": "", "optim": "import torch\n", **modules}.items():
        (folder / f"{name}.py").write_text(text)
    return folder


@pytest.mark.parametrize("imports", ["from ._impl import SGD", "from . import _impl", "import assignment._impl",
                                     "from assignment._impl import SGD", "from assignment import _impl"])
def test_the_package_scan_follows_the_packages_own_imports(imports, tmp_path):
    folder = _package(tmp_path / "assignment", optim=imports + "\n",
                      _impl='import torch\nSGD = type("SGD", (torch.optim.SGD,), {})\n')
    assert [str(f) for f in optim_source.source_findings(folder)] == ["_impl.py line 2: torch.optim.SGD"]


def test_the_package_scan_reads_init_and_what_it_imports(tmp_path):
    folder = _package(tmp_path / "assignment", __init__="from . import _setup\n", _setup="import gc\n")
    assert [str(f) for f in optim_source.source_findings(folder)] == ["_setup.py line 1: import gc"]


def test_the_package_scan_names_imports_of_files_the_submission_lacks(tmp_path):
    folder = _package(tmp_path / "assignment", optim="from . import _written_later\n")
    assert [f.what for f in optim_source.source_findings(folder)] == [
        "imports assignment._written_later, which is not a file of the submission"]


def test_helpers_in_a_second_module_and_unrelated_modules_pass(tmp_path):
    helpers = "import torch\n\ndef decayed(p, g, wd):\n    return g.add(p, alpha=wd) if wd else g\n"
    folder = _package(tmp_path / "assignment", optim=(KIT / "solutions" / "optim.py").read_text()
                      + "\nfrom ._updates import decayed\n", _updates=helpers, __init__="from . import optim\n",
                      amp="import importlib\nOPT = torch.optim.AdamW\n")  # not imported by optim or __init__
    assert optim_source.source_findings(folder) == ()


@pytest.mark.parametrize("package", ["solutions", "assignment"])
def test_the_reference_and_the_stubs_pass_the_scan(package):
    assert optim_source.source_findings(KIT / package) == ()


def _torch_loop(stem: str, function: str) -> str:
    """The body of one of torch's own update functions, as a student might paste it into a helper."""
    text = (Path(torch.optim.__file__).parent / f"{stem}.py").read_text()
    body = text[text.index(f"def {function}("):]
    return body[:body.index("\ndef ", 1)]


@pytest.mark.parametrize("stem, function", [("sgd", "_single_tensor_sgd"), ("adagrad", "_single_tensor_adagrad")])
def test_a_near_copy_of_torchs_update_in_any_module_is_refused_with_its_line(tmp_path, stem, function):
    copied = "import torch\n\n\n" + _torch_loop(stem, function).replace("param", "weight").replace("grad", "g")
    folder = _package(tmp_path / "assignment", optim=(KIT / "assignment" / "optim.py").read_text(),
                      memory=copied)  # not imported by optim.py: a copy counts wherever it is
    found = optim_source.source_findings(folder)
    assert {f.file for f in found} == {"memory.py"} and (found[0].line, found[0].what.split(" (")[0]) == (
        4, f"a near copy of torch's torch/optim/{stem}.py"), found


@pytest.mark.parametrize("folder", ["solutions/optim.py", "grader/tests/fixtures/alternatives/p5_optim.py",
                                    "grader/tests/fixtures/alternatives/p5_optim_lenient.py"])
def test_written_optimizers_are_no_near_copy(folder):
    assert optim_source.near_copies("optim.py", (KIT / folder).read_text()) == []


def test_a_mismatch_names_the_step_the_parameter_the_index_and_both_values():
    want = [torch.zeros(3, 2, 2)]
    got = [want[0].clone()]
    got[0][2, 1, 0] = 0.5
    message = drive.mismatch(got, want, "torch.optim.SGD")
    assert message.startswith("after step 2, parameter 0[1, 0] is 0.5, torch.optim.SGD gives 0.0")
    assert drive.mismatch(want, [w.clone() for w in want], "torch.optim.SGD") is None


def test_the_judge_side_returns_copies_as_the_wire_does():
    parameter = Local(torch.nn.Parameter(torch.ones(2)))
    value = parameter.read()
    value.add_(1)
    assert torch.equal(parameter.read(), torch.ones(2)) and not value.requires_grad
    state = Local({"buffer": torch.zeros(2)}).call("get", "buffer")
    assert torch.equal(state, torch.zeros(2))


def test_copydetect_comes_without_pyplot_until_pyplot_is_used():
    """The judge imports copydetect for P5 without the matplotlib.pyplot it needs only for HTML reports;
    pyplot, once used, is the real one."""
    probe = ("import sys\nimport grader.judge.drivers.optim_source as source\n"
             "print('matplotlib' in sys.modules, len(source._torch_fingerprints()) > 0)\n"
             "import copydetect.detector as detector\ndetector.plt.close('all')\n"
             "print(type(sys.modules['matplotlib.pyplot']).__name__, sys.modules['matplotlib.pyplot'].__file__ is not None)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(KIT), "MPLBACKEND": "Agg"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True", "module", "True"]
