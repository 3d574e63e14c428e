""""Code is reached by its name" (``tests/_by_name.py``): every route the rule names is refused, where it is taken
and wherever it hides (a library's evaluator, a thread, a wrapper that hides the refusal), and what correct
solutions reach through libraries runs.

Each case runs in a fresh interpreter with the hook installed as the worker installs it (``everywhere``) or as
the public tests do, over a package folder holding ``mod.py``; the case prints RAN when its route ran.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader.public import PUBLIC_TESTS

REFUSED = {
    "text run by exec": "exec('ran = 1')",
    "text run by eval": "eval('1')",
    "text compiled": "compile('1', '<text>', 'eval')",
    "a global unpickled": "import pickle; pickle.loads(pickle.dumps(len))",
    "a global unpickled by numpy": "import io, numpy, pickle; numpy.load(io.BytesIO(pickle.dumps(len)), allow_pickle=True)",
    "a string annotation evaluated": "import typing\ndef f(x: 'int'): pass\ntyping.get_type_hints(f)",
    "marshalled code loaded": "import marshal; marshal.loads(marshal.dumps(1))",
    "a function's code read": "(lambda: 1).__code__",
    "a frame asked for": "import sys; sys._getframe()",
    "a frame asked for through inspect": "import inspect; inspect.currentframe()",
    "a traceback's frame": "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    e.__traceback__.tb_frame",
    "a generator's frame": "g = (i for i in ()); g.gi_frame",
    "the collector's referrers": "import gc; gc.get_referrers(len)",
    "every object the collector holds": "import gc; gc.get_objects()",
    "a trace function": "import sys; sys.settrace(lambda *a: None)",
    "a profile function": "import sys; sys.setprofile(lambda *a: None)",
    "another audit hook": "import os, sys\nseen = []\nsys.addaudithook(lambda *a: seen.append(a))\nos.listdir('.')\n"
                          "assert seen",  # Python drops a hook another refuses, silently
    "ctypes": "import ctypes; ctypes.string_at(ctypes.addressof(ctypes.c_int(1)), 4)",
    "the process's own memory": "open('/proc/self/mem', 'rb')",
    "text run by exec in a thread": "import threading\nns = {}\nt = threading.Thread(target=exec, args=('x = 1', ns))\n"
                                    "t.start(); t.join()\nassert 'x' in ns",
    "a module written at run time": "import os, sys, tempfile\nd = tempfile.mkdtemp()\n"
                                    "open(os.path.join(d, 'written.py'), 'w').write('x = 1')\nsys.path.insert(0, d)\n"
                                    "import written",
    "a module written into the package at run time": "import os, pkg\n"
                                                      "open(os.path.join(pkg.__path__[0], 'new.py'), 'w').write('x = 1')\n"
                                                      "import pkg.new",
    "a module of the package rewritten and imported again": "import importlib, pkg.mod\n"
                                                             "open(pkg.mod.__file__, 'w').write('x = 1')\n"
                                                             "importlib.reload(pkg.mod)",
}
RUNS = {
    "a standard module imported on first use": "import colorsys",
    "the package's own module imported": "import pkg.mod",
    "a named tuple": "import collections; collections.namedtuple('Point', 'x y')(1, 2)",
    "a generic alias": "import typing; typing.IO[bytes]",
    "a forward reference made (not evaluated)": "import typing; typing.ForwardRef('int')",
    "the stack as text": "import traceback; traceback.format_stack()",
    "torch.no_grad() on a function": "import torch\n@torch.no_grad()\ndef f(): return 1\nf()",
    # what torch.cuda.device_count() does on a CUDA build: NVML through ctypes (no NVML here: OSError)
    "torch counting CUDA devices through NVML": "import torch\ntry:\n    torch.cuda._raw_device_count_nvml()\n"
                                                "except OSError:\n    pass",
}


def run(tmp_path: Path, code: str, everywhere: bool = True, in_package: bool = False) -> subprocess.CompletedProcess:
    """``code`` run after the hook's install: at the top level, or (``in_package``) inside ``pkg/mod.py``."""
    package = tmp_path / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "mod.py").write_text(f"def case():\n{textwrap.indent(code, '    ')}\n" if in_package else "")
    body = "import pkg.mod\npkg.mod.case()" if in_package else code
    program = (f"import sys\nsys.path[:0] = [{str(PUBLIC_TESTS)!r}, {str(tmp_path)!r}]\nimport _by_name\n"
               f"_by_name.install({str(package)!r}, everywhere={everywhere})\n{body}\nprint('RAN')\n")
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}  # imports write .pyc
    return subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env=env)


@pytest.mark.parametrize("route", REFUSED)
def test_each_route_is_refused_in_the_worker(route, tmp_path):
    done = run(tmp_path, REFUSED[route])
    assert "RAN" not in done.stdout, done.stderr
    assert "code is reached by its name" in done.stderr or "AssertionError" in done.stderr, done.stderr


@pytest.mark.parametrize("case", RUNS)
def test_what_correct_solutions_reach_runs(case, tmp_path):
    done = run(tmp_path, RUNS[case])
    assert done.stdout.strip() == "RAN", done.stderr


def test_public_tests_judge_what_runs_with_the_packages_frames_on_the_stack(tmp_path):
    outside = run(tmp_path / "outside", "exec('x = 1')", everywhere=False)
    inside = run(tmp_path / "inside", "exec('x = 1')", everywhere=False, in_package=True)
    assert outside.stdout.strip() == "RAN", outside.stderr
    assert "RAN" not in inside.stdout and "refused: compile" in inside.stderr  # exec compiles its text first
    assert "pkg/mod.py:2" in inside.stderr  # the submission's line that led to it


def test_a_refusal_a_library_wraps_is_still_named(tmp_path):
    code = ("import io, numpy, pickle\ntry:\n    numpy.load(io.BytesIO(pickle.dumps(len)), allow_pickle=True)\n"
            "except Exception as e:\n    print(_by_name.described(e))")
    done = run(tmp_path, code)
    assert "UnpicklingError" in done.stdout and "raised from refused: pickle.find_class" in done.stdout, done.stdout


def test_a_compiled_copy_of_the_package_is_loaded_by_the_public_tests_alone(tmp_path):
    again = "import sys\ndel sys.modules['pkg.mod']\nimport pkg.mod"  # mod.py imports itself again: from its .pyc
    public = run(tmp_path / "public", again, everywhere=False, in_package=True)
    worker = run(tmp_path / "worker", again, in_package=True)
    assert public.stdout.strip() == "RAN", public.stderr
    assert "RAN" not in worker.stdout and "refused: marshal.loads" in worker.stderr, worker.stderr


def test_a_library_that_writes_code_and_imports_it_is_imported_before_the_hook(tmp_path):
    """torch 2.6's ``torch.distributed.nn`` (which ``torch._dynamo`` imports) writes its remote-module template to a
    temporary file and imports it: the import system compiling a file outside the library folders, refused once
    the hook is in. ``install`` imports it first; a correct P3 or P8 that reaches it then runs on torch 2.6."""
    torch = pytest.importorskip("torch")
    if not torch.distributed.is_available():
        pytest.skip("this torch build has no torch.distributed")
    done = run(tmp_path, "assert all(name in sys.modules for name in _by_name.GENERATES_ON_IMPORT)\n"
                         "import torch.distributed.nn")
    assert done.stdout.strip() == "RAN", done.stderr
