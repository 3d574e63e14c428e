"""P5's source rule: optim.py, and every module of the package it imports, written from scratch.

What keeps P5's points for work is P5's worker, whose torch has no working optimizer
(``optim_stubs``): nothing a submission reaches there performs torch's update. What it could still
bring is torch's update in its own files: ``near_copies`` compares every module P5 reads with
torch.optim's optimizer modules (token similarity, ``copydetect``) and refuses a near copy with the
file and line. The static scan beside it names, for an honest student, the shortcut the rule
forbids: uses of torch.optim's own optimizers (classes, modules, functional forms) or foreach / fused
kernels, by name, by alias or by a string the scan can compute, and every dynamic way of reaching
code (``scan.dynamic``). It reads the judge's copy of the files; nothing runs them.
"""

from __future__ import annotations

import ast
import functools
import importlib
import io
import logging
import sys
import types
from pathlib import Path

import torch

from . import scan


class _Later(types.ModuleType):
    """Stands for a module that is imported at the first use of one of its attributes."""

    def __getattr__(self, name: str):
        return getattr(importlib.import_module(self.__name__), name)


def _import_copydetect() -> types.ModuleType:
    """copydetect, without the matplotlib.pyplot its detector imports for an HTML report the judge never
    writes (a third of a CPU-second of a judge's start): while copydetect imports, a stand-in that imports
    the real pyplot at its first use takes its place."""
    if "matplotlib" in sys.modules:
        return importlib.import_module("copydetect")
    parent, pyplot = types.ModuleType("matplotlib"), _Later("matplotlib.pyplot")
    parent.pyplot = pyplot
    sys.modules.update({"matplotlib": parent, "matplotlib.pyplot": pyplot})
    try:
        return importlib.import_module("copydetect")
    finally:
        for name, stand_in in (("matplotlib", parent), ("matplotlib.pyplot", pyplot)):
            if sys.modules.get(name) is stand_in:
                del sys.modules[name]


copydetect = _import_copydetect()

# torch.optim's optimizers other than Optimizer itself, by class and by module, in the judge's torch.
OPTIMIZERS = frozenset(name for name, value in vars(torch.optim).items() if isinstance(value, type)
                       and issubclass(value, torch.optim.Optimizer) and value is not torch.optim.Optimizer)
OPTIMIZER_MODULES = frozenset({module.rpartition(".")[2] for module in (getattr(torch.optim, name).__module__
                                                                       for name in OPTIMIZERS)
                               if module.startswith("torch.optim.")} | {"sgd", "adagrad", "_functional", "_multi_tensor"})
SOURCE_RULE = ("P5 asks for SGD and AdaGrad written from scratch: no module of your package may copy torch.optim's "
               "optimizer code, and optim.py, and every module of your package it imports (__init__.py included), "
               "may not use torch.optim's optimizers other than "
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


# Token similarity (copydetect's winnowing over pygments tokens, names folded to one letter): a run of
# at least NOISE filtered characters in common is a match, and COPIED characters matched with one of
# torch's optimizer modules make a near copy. Ten-odd lines of torch's update loop match about 250; the
# reference, the alternatives and the curated mutants match nothing at this length.
NOISE, COPIED = 60, 150


def _fingerprint(text: str, name: str) -> copydetect.CodeFingerprint:
    logging.getLogger().disabled, quiet = True, logging.getLogger().disabled  # it warns per file it cannot lex
    try:
        return copydetect.CodeFingerprint(name, NOISE, 1, fp=io.StringIO(text))
    finally:
        logging.getLogger().disabled = quiet


@functools.lru_cache(maxsize=1)
def _torch_fingerprints() -> tuple[tuple[str, copydetect.CodeFingerprint], ...]:
    """torch.optim's optimizer modules as this judge's torch has them: (``torch/optim/sgd.py``, fingerprint)."""
    folder = Path(torch.optim.__file__).parent
    paths = [p for stem in sorted(OPTIMIZER_MODULES) for p in (folder / f"{stem}.py", folder / stem / "__init__.py")
             if p.is_file()]
    return tuple((str(p.relative_to(folder.parents[1])), _fingerprint(p.read_text(), p.name)) for p in paths)


def near_copies(file: str, text: str) -> list[scan.Finding]:
    """Where one module's ``text`` copies one of torch's optimizer modules: the line its longest copied run
    starts on, per torch module it copies ``COPIED`` characters or more of."""
    mine = _fingerprint(text, "module.py")
    found = []
    for name, theirs in _torch_fingerprints():
        overlap, _, (slices, _) = copydetect.compare_files(mine, theirs)
        if overlap >= COPIED:
            start = int(max(zip(*slices), key=lambda s: s[1] - s[0])[0])
            found.append(scan.Finding(file, text.count("\n", 0, start) + 1,
                                      f"a near copy of torch's {name} ({overlap} tokens in common)"))
    return found


def shortcuts(text: str, file: str = "optim.py") -> list[scan.Finding]:
    """What P5's rule forbids in one module's text: delegation, and dynamic ways of reaching code."""
    source = scan.Source(text, file)
    return sorted(set(delegation(source) + scan.dynamic(source)), key=lambda f: (f.line, f.what))


@functools.lru_cache(maxsize=8)
def source_findings(folder: Path) -> tuple[scan.Finding, ...]:
    """P5's rule on the submission in ``folder``: no module of it (imported or not) a near copy of torch's
    optimizer modules, and none of the shortcuts the scan names in optim.py and every module it imports."""
    sources, problems = scan.package(folder, "optim")
    found = [finding for source in sources for finding in delegation(source) + scan.dynamic(source)]
    found += [finding for path in sorted(folder.rglob("*.py"))
              for finding in near_copies(path.relative_to(folder).as_posix(), path.read_text(errors="replace"))]
    return tuple(problems + sorted(set(found), key=lambda f: (f.file != "optim.py", f.file, f.line, f.what)))


def assert_written_here(folder: Path) -> None:
    """Fail (with the rule, each file and line) if the submission's source breaks P5's rule."""
    found = source_findings(folder)
    if found:
        listed = "; ".join(map(str, found[:8])) + (f"; and {len(found) - 8} more" if len(found) > 8 else "")
        raise AssertionError(f"{SOURCE_RULE} Found: {listed}")
