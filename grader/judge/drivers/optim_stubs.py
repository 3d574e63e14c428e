"""P5's worker runs a torch whose optimizers do nothing but raise: what ``sub.withholding`` is given.

Every module of ``torch.optim`` that defines one of its optimizers (``optim_source.OPTIMIZER_MODULES``,
``_functional`` included) is covered, in P5's worker only, by a stub written here from the judge's
own copy of the file: the same imports, ``__all__`` and constants, every top-level function (and
every other name bound at the top level) a function that raises, every class a class of the same name (an ``Optimizer`` subclass where torch's is one) whose
``__init__`` and ``step`` raise. Every name stays importable (``torch.optim``, ``torch.distributed.optim``
and the submission import as before); nothing in the files the worker can read performs an update,
so replayed text, resolvers by string, pickled class names and rebindings all reach a stub. The
compiled copies of those files (``__pycache__``) are covered by empty files, and the fused and
foreach operator kernels raise (``grader/confined/kernels.py``).
"""

from __future__ import annotations

import ast
import functools
import os
from pathlib import Path

import torch

from ...containment.worker import Withheld
from .optim_source import OPTIMIZER_MODULES

KERNELS = ("_foreach_", "_fused_sgd", "_fused_adagrad", "_fused_adam")
RULE = ("P5 asks for SGD and AdaGrad written from scratch: while P5 is graded, torch.optim's optimizers, "
        "their functional forms and torch's foreach / fused optimizer kernels are not available (see the handout, P5)")
_OPTIM = Path(torch.optim.__file__).parent


def _raising(name: str, what: str) -> list[ast.stmt]:
    return ast.parse(f"def {name}(*args, **kwargs):\n    raise RuntimeError({f'{what}: {RULE}'!r})\n").body


def stub(text: str, module: str) -> str:
    """The stub of torch's ``module`` (e.g. ``torch.optim.sgd``) whose text is ``text``."""
    real = __import__(module, fromlist=["_"])
    body: list[ast.stmt] = ast.parse("from torch.optim.optimizer import Optimizer as _Optimizer").body
    for node in ast.parse(text).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            body.append(node)
        elif isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
            if isinstance(node.value, ast.Constant) or [t.id for t in node.targets] == ["__all__"]:
                body.append(node)  # __all__ and plain constants (docstring fragments)
            else:  # a name bound to something made here (``SGD = partialclass(...)``): importable, raising
                body += [stmt for t in node.targets for stmt in _raising(t.id, f"{module}.{t.id}")]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body += _raising(node.name, f"{module}.{node.name}")
        elif isinstance(node, ast.ClassDef):
            cls = getattr(real, node.name, None)
            base = "_Optimizer" if isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer) else "object"
            methods = [*_raising("__init__", f"{module}.{node.name}"), *_raising("step", f"{module}.{node.name}.step")]
            body.append(ast.ClassDef(name=node.name, bases=[ast.Name(base)], keywords=[], body=methods,
                                     decorator_list=[], type_params=[]))
    return ast.unparse(ast.fix_missing_locations(ast.Module(body=body, type_ignores=[]))) + "\n"


def _spellings(path: Path) -> set[str]:
    """A path as the worker may reach it: as imported, and resolved (a virtual environment behind a link)."""
    return {os.path.abspath(path), os.path.realpath(path)}


@functools.lru_cache(maxsize=1)
def withheld() -> Withheld:
    """What P5's worker runs without: each optimizer module covered by its stub, its compiled copies by
    an empty file, and the fused / foreach kernels."""
    covers: dict[str, str] = {}
    for stem in sorted(OPTIMIZER_MODULES):
        source = _OPTIM / f"{stem}.py"
        if not source.is_file():
            source = _OPTIM / stem / "__init__.py"
        if not source.is_file():
            continue
        covers.update(dict.fromkeys(_spellings(source), stub(source.read_text(), f"torch.optim.{stem}")))
        for compiled in source.parent.glob(f"__pycache__/{source.stem}.*.pyc"):
            covers.update(dict.fromkeys(_spellings(compiled), ""))
    return Withheld(covers=covers, kernels=KERNELS, rule=RULE)
