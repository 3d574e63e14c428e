"""Public tests: choose the implementation under test and summarise results per problem.

``pytest tests/`` tests ``assignment`` (your code). ``--impl solutions`` tests another
importable package; ``--impl PATH`` tests a submission folder (one that holds an
``assignment/`` package, or the module files themselves).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import Phase, settings

# No "explain" phase: on a failing property it reruns the test many times to point at lines,
# which costs minutes on an unfinished module and adds nothing to the shrunk example shown.
settings.register_profile("public", deadline=None, phases=[phase for phase in Phase if phase is not Phase.explain])
settings.load_profile("public")

MODULES = ("memory", "strides", "einsum", "flops", "optim", "data", "checkpoint", "amp")
PROBLEMS = {f"P{i}": name for i, name in enumerate(MODULES, start=1)}
_TEST_FILE = re.compile(r"test_(p\d)_")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--impl", default="assignment",
                     help="package name or submission folder to test (default: assignment)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skipped without one)")
    config.stash[_IMPL] = _load_package(config.getoption("--impl"))
    config.pluginmanager.register(ProblemTally(), "problem-tally")


_IMPL = pytest.StashKey[ModuleType]()


def _load_package(impl: str) -> ModuleType:
    """Import the package under test by name, or from a folder as a fresh package."""
    path = Path(impl)
    if not path.exists():
        try:
            return importlib.import_module(impl)
        except ImportError as exc:
            raise pytest.UsageError(f"--impl {impl!r}: no such folder, and no importable package ({exc})") from exc
    folder = path / "assignment" if (path / "assignment" / "__init__.py").exists() or (path / "assignment").is_dir() else path
    if not any((folder / f"{name}.py").exists() for name in MODULES):
        raise pytest.UsageError(f"--impl {impl!r}: found none of {', '.join(m + '.py' for m in MODULES)} in {folder}")
    package_name = "_submission_under_test"
    init = folder / "__init__.py"
    spec = importlib.util.spec_from_file_location(
        package_name, init if init.exists() else None, submodule_search_locations=[str(folder)])
    if spec is None:  # pragma: no cover - spec_from_file_location only fails on odd paths
        raise pytest.UsageError(f"--impl {impl!r}: cannot import {folder}")
    package = importlib.util.module_from_spec(spec)
    sys.modules[package_name] = package
    if spec.loader is not None and init.exists():
        spec.loader.exec_module(package)
    return package


def _module(request: pytest.FixtureRequest, name: str) -> ModuleType:
    package = request.config.stash[_IMPL]
    try:
        return importlib.import_module(f"{package.__name__}.{name}")
    except Exception as exc:  # noqa: BLE001 - a broken student module must read as a clear failure
        pytest.fail(f"could not import {name}.py from {package.__name__}: {type(exc).__name__}: {exc}", pytrace=False)


def _module_fixture(name: str):
    @pytest.fixture(scope="session", name=name)
    def fixture(request: pytest.FixtureRequest) -> ModuleType:
        return _module(request, name)

    fixture.__doc__ = f"The {name} module of the implementation under test."
    return fixture


memory, strides, einsum, flops, optim, data, checkpoint, amp = (_module_fixture(name) for name in MODULES)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="not run: needs a GPU (graded on GPU runners)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


class ProblemTally:
    """Counts public test outcomes per problem and prints a short table at the end."""

    def __init__(self) -> None:
        self.counts: Counter = Counter()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        match = _TEST_FILE.search(report.nodeid)
        if match and (report.when == "call" or (report.when == "setup" and not report.passed)):
            problem = match.group(1).upper()
            self.counts[(problem, "total")] += 1
            self.counts[(problem, report.outcome)] += 1

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.counts:
            return
        write = terminalreporter.write_line
        terminalreporter.section("public tests per problem")
        write(f"{'problem':<16}{'passed':>8}{'failed':>8}{'skipped':>9}{'total':>7}")
        for problem, module in PROBLEMS.items():
            if total := self.counts[(problem, "total")]:
                write(f"{problem + ' ' + module:<16}{self.counts[(problem, 'passed')]:>8}"
                      f"{self.counts[(problem, 'failed')]:>8}{self.counts[(problem, 'skipped')]:>9}{total:>7}")
        write("Passing the public tests is a good sign, not a grade: hidden tests check more (handout.md, 'Grading').")
