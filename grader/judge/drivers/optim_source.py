"""P5's source rule: optim.py, and every module of the package it imports, written from scratch.

The static scan is the first line, before the run-time tripwires (``optim.DELEGATION``): uses of
torch.optim's own optimizers (classes, modules, functional forms) or foreach / fused kernels, by
name, by alias or by a string the scan can compute, and every dynamic way of reaching code
(``scan.dynamic``). It reads the judge's copy of the files; nothing runs them.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import torch

from . import scan

# torch.optim's optimizers other than Optimizer itself, by class and by module, in the judge's torch.
OPTIMIZERS = frozenset(name for name, value in vars(torch.optim).items() if isinstance(value, type)
                       and issubclass(value, torch.optim.Optimizer) and value is not torch.optim.Optimizer)
OPTIMIZER_MODULES = frozenset({module.rpartition(".")[2] for module in (getattr(torch.optim, name).__module__
                                                                       for name in OPTIMIZERS)
                               if module.startswith("torch.optim.")} | {"sgd", "adagrad", "_functional", "_multi_tensor"})
SOURCE_RULE = ("P5 asks for SGD and AdaGrad written from scratch: optim.py, and every module of your package it "
               "imports (__init__.py included), may not use torch.optim's optimizers other than "
               "torch.optim.Optimizer (subclassing them included), their modules or functional forms "
               "(torch.optim._functional, torch.optim.sgd.sgd...) or torch._foreach_* kernels, and no code there "
               f"may reach modules or objects dynamically ({scan.DYNAMIC_WAYS}): see the handout, P5.")


def _forbidden(name: str) -> bool:
    """A name (or dotted path) that reaches one of torch.optim's optimizers or a foreach / fused kernel."""
    return any(part in OPTIMIZERS or part in OPTIMIZER_MODULES or part.startswith(("_foreach_", "_fused_"))
               for part in name.split("."))


def _own(dotted: str | None) -> bool:
    """Whether a resolved name is one the submission defines (``optim.SGD`` after ``from . import optim``),
    not one reached through a module of it (``optim.torch.optim.SGD``)."""
    root, _, rest = (dotted or "").partition(".")
    return (root == "" and bool(rest) or root == scan.PACKAGE) and len(rest.split(".")) <= 2


def delegation(source: scan.Source) -> list[scan.Finding]:
    """Uses of torch.optim's own optimizers (classes, modules, functional forms) or foreach / fused
    kernels in one module, by name, by alias or by a string the scan can compute."""
    found = []
    for node in ast.walk(source.tree):
        if isinstance(node, ast.Attribute) and _forbidden(node.attr) and not _own(source.dotted(node)):
            found.append(source.finding(node, ast.unparse(node)[:80]))
        elif isinstance(node, ast.Name) and (node.id.startswith(("_foreach_", "_fused_")) or (
                not _own(alias := source.aliases.get(node.id, "")) and _forbidden(alias))):
            found.append(source.finding(node, f"{node.id} ({source.aliases.get(node.id, node.id)})"))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torch"):
            found += [source.finding(node, f"from {node.module} import {a.name}") for a in node.names
                      if _forbidden(a.name) or _forbidden(node.module or "")]
        elif isinstance(node, ast.Import):
            found += [source.finding(node, f"import {a.name}") for a in node.names if _forbidden(a.name)]
    found += [scan.Finding(source.file, line, repr(text)) for line, text in source.asked_by_string(keys=True)
              if _forbidden(text)]
    return found


def shortcuts(text: str, file: str = "optim.py") -> list[scan.Finding]:
    """What P5's rule forbids in one module's text: delegation, and dynamic ways of reaching code."""
    source = scan.Source(text, file)
    return sorted(set(delegation(source) + scan.dynamic(source)), key=lambda f: (f.line, f.what))


@functools.lru_cache(maxsize=8)
def source_findings(folder: Path) -> tuple[scan.Finding, ...]:
    """P5's rule over optim.py and every module of the submission in ``folder`` it imports."""
    sources, problems = scan.package(folder, "optim")
    found = [finding for source in sources for finding in delegation(source) + scan.dynamic(source)]
    return tuple(problems + sorted(set(found), key=lambda f: (f.file != "optim.py", f.file, f.line, f.what)))


def assert_written_here(folder: Path) -> None:
    """Fail (with the rule, each file and line) if the submission's source breaks P5's rule."""
    found = source_findings(folder)
    if found:
        listed = "; ".join(map(str, found[:8])) + (f"; and {len(found) - 8} more" if len(found) > 8 else "")
        raise AssertionError(f"{SOURCE_RULE} Found: {listed}")
