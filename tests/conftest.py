"""Public tests: choose the implementation under test and summarise results per problem.

``pytest tests/`` tests ``assignment`` (your code). ``--impl solutions`` tests another
importable package; ``--impl PATH`` tests a submission folder (one that holds an
``assignment/`` package, or the module files themselves).
"""

from __future__ import annotations

import ast
import gc
import importlib
import importlib.util
import re
import sys
import textwrap
import traceback
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import Phase, settings

import _by_name
import _deferred_dynamo
import _kit
from _kit import NotImplementedYet, shown_path, unwritten

# Derandomized: every run draws the same examples, so a failure comes back until it is fixed (no
# seed to note, no example database written). One failure a test, the simplest: not a group of
# every distinct error hypothesis met on the way. No "explain" phase: on a failing property it reruns
# the test many times to point at lines, which costs minutes on an unfinished module and adds
# nothing to the shrunk example shown. Built on hypothesis's own "default", whatever the environment.
settings.register_profile("public", settings.get_profile("default"), deadline=None, derandomize=True, database=None, report_multiple_bugs=False,
                          phases=[phase for phase in Phase if phase is not Phase.explain])
settings.load_profile("public")

MODULES = ("memory", "strides", "einsum", "flops", "optim", "data", "checkpoint", "amp")
PROBLEMS = {f"P{i}": name for i, name in enumerate(MODULES, start=1)}
_TEST_FILE = re.compile(r"test_(p\d+)_\w+\.py")
HERE = Path(__file__).resolve().parent
_SECTION = re.compile(r"section '([^']+)'")
NOT_IMPLEMENTED = "not implemented"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--impl", default="assignment",
                     help="package name or submission folder to test (default: assignment)")
    parser.addoption("--rule", action="append", default=[], metavar="ID",
                     help="run only the tests that check this rule of handout.md (P5.skip-none-grad); repeatable")


def pytest_configure(config: pytest.Config) -> None:
    _deferred_dynamo.install()  # torch.optim would import torch._dynamo (about a second) on first use: nothing here compiles
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skipped without one)")
    config.addinivalue_line("markers", "rule(*ids): the rules of handout.md this test checks; a failure quotes them")
    for problem, module in PROBLEMS.items():
        config.addinivalue_line("markers", f"{problem.lower()}: the public tests of {problem} ({module}.py): -m {problem.lower()}")
    config.stash[_IMPL] = _load_package(config.getoption("--impl"))
    config.pluginmanager.register(ProblemTally(Path(list(config.stash[_IMPL].__path__)[0]), config.rootpath),
                                  "problem-tally")


_IMPL = pytest.StashKey[ModuleType]()


def _load_package(impl: str) -> ModuleType:
    """Import the package under test by name, or from a folder as a fresh package, once "code is reached by its
    name" is enforced on it (``_by_name``: what runs with its frames on the stack, as the grade does)."""
    path = Path(impl)
    if not path.exists():
        try:
            spec = importlib.util.find_spec(impl)
            if spec is not None and spec.submodule_search_locations:
                _by_name.install(list(spec.submodule_search_locations)[0], everywhere=False)
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
    _by_name.install(str(folder), everywhere=False)
    if spec.loader is not None and init.exists():
        spec.loader.exec_module(package)
    return package


def _module(request: pytest.FixtureRequest, name: str) -> ModuleType:
    package = request.config.stash[_IMPL]
    file = shown_path(Path(list(package.__path__)[0]) / f"{name}.py")
    try:
        return importlib.import_module(f"{package.__name__}.{name}")
    except Exception as exc:  # noqa: BLE001 - a broken student module must read as a clear failure
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).name == f"{name}.py"]
        where = f" (line {frames[-1].lineno})" if frames and not isinstance(exc, SyntaxError) else ""
        detail = _by_name.described(exc).replace(f"{package.__name__}.", f"{Path(file).parent.name}.")
        raise pytest.fail.Exception(f"{file} could not be imported: {detail}{where}",
                                    pytrace=False) from None


def _module_fixture(name: str):
    @pytest.fixture(scope="session", name=name)
    def fixture(request: pytest.FixtureRequest) -> ModuleType:
        return _module(request, name)

    fixture.__doc__ = f"The {name} module of the implementation under test."
    return fixture


globals().update({name: _module_fixture(name) for name in MODULES})  # a fixture per module: def test_x(memory)


def problem_of(path: Path) -> str | None:
    """The problem ("P5") of a public test file; None for any other file (the kit's own tests included)."""
    match = _TEST_FILE.fullmatch(path.name)
    return match.group(1).upper() if match and path.resolve().parent == HERE else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with its problem (``-m p5``) and the public names it exercises (``-k get_batch``
    selects every test that calls ``get_batch``, whatever the test is named); skip GPU tests without CUDA."""
    import torch

    # The names a test exercises matter only to -k: reading every test's code costs a tenth of a run.
    exercised = _Exercised(Path(list(config.stash[_IMPL].__path__)[0])) if config.getoption("keyword") else None
    skip = pytest.mark.skip(reason="not run: needs a GPU (graded on GPU runners)")
    _select_rules(config, items)
    for item in items:
        problem = problem_of(item.path)
        if problem and isinstance(item, pytest.Function):
            item.add_marker(getattr(pytest.mark, problem.lower()))
            if exercised is not None:
                item.extra_keyword_matches.update(exercised(item, PROBLEMS[problem]))
        if "gpu" in item.keywords and not torch.cuda.is_available():
            item.add_marker(skip)


def rules_of(item: pytest.Item) -> list[str]:
    """The handout rule ids a test names with ``@pytest.mark.rule(...)``, in order."""
    return list(dict.fromkeys(i for marker in item.iter_markers("rule") for i in marker.args))


def _select_rules(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--rule ID``: keep only the tests that name one of the ids."""
    wanted = set(config.getoption("rule"))
    if wanted:
        kept = [item for item in items if wanted & set(rules_of(item))]
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """While a test runs, its failure messages quote the handout rules it checks (``rule:`` lines)."""
    _kit.RULES_CHECKED[:] = rules_of(item)
    try:
        return (yield)
    finally:
        _kit.RULES_CHECKED.clear()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A failure that did not come through ``_kit.complain`` (a plain assert) quotes its rules in a section."""
    report = yield
    if report.failed and call.when == "call" and "rule:     [" not in report.longreprtext:
        quotes = _kit.quoted(rules_of(item))
        if quotes:
            report.sections.append(("the handout rules this test checks", "\n".join(quotes)))
    return report


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what is loaded now (torch, your package, the tests): the garbage collector never walks it again,
    neither in the full collections hypothesis runs nor at the interpreter's exit (half a second a run)."""
    gc.freeze()


class _Exercised:
    """The public names of a problem's module that a test function reaches: attributes of that name
    anywhere in the test or in the module-level helpers of its file that it calls, transitively."""

    def __init__(self, package: Path) -> None:
        self.package = package
        self.public: dict[str, set[str]] = {}
        self.files: dict[Path, dict[str, ast.FunctionDef]] = {}

    def __call__(self, item: pytest.Function, module: str) -> set[str]:
        names = self._public(module)
        helpers = self._functions(Path(item.path))
        seen, frontier, found = set(), [item.originalname], set()
        while frontier:
            name = frontier.pop()
            if name in seen or name not in helpers:
                continue
            seen.add(name)
            for node in ast.walk(helpers[name]):
                if isinstance(node, ast.Attribute) and node.attr in names:
                    found.add(node.attr)
                elif isinstance(node, ast.Name):
                    frontier.append(node.id)
        return found

    def _public(self, module: str) -> set[str]:
        if module not in self.public:
            try:
                tree = ast.parse((self.package / f"{module}.py").read_text(encoding="utf-8"))
            except (OSError, SyntaxError, ValueError):
                tree = ast.Module(body=[], type_ignores=[])
            self.public[module] = {node.name for node in tree.body if isinstance(
                node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_")}
        return self.public[module]

    def _functions(self, path: Path) -> dict[str, ast.FunctionDef]:
        if path not in self.files:
            tree = ast.parse(path.read_text(encoding="utf-8"))
            self.files[path] = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
        return self.files[path]


def stub_sections(path: Path) -> list[str]:
    """The handout sections that a module's ``raise NotImplementedError("... section '...'")`` still
    name, in the order of the source (a test stops at the first stub it reaches: this finds the rest)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return []
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and isinstance(node.exc.func, ast.Name)
                and node.exc.func.id == "NotImplementedError"):
            for argument in node.exc.args:
                match = _SECTION.search(argument.value) if isinstance(argument, ast.Constant) and isinstance(
                    argument.value, str) else None
                if match:
                    found.append((node.lineno, match.group(1)))
    return [section for _, section in sorted(found)]


class ProblemTally:
    """Counts public test outcomes per problem and prints a short table as the very last output.

    A test that fails because it reached a stub (``NotImplementedError``) is counted as "not
    implemented": it still fails the run, but is not printed one by one; the table lists the
    handout sections still to do instead.
    """

    def __init__(self, package: Path, root: Path) -> None:
        self.package, self.root = package, root
        self.counts: Counter = Counter()
        self.selected: Counter = Counter()
        self.todo: dict[str, None] = {}

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.select(item.nodeid for item in session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids: list[str]) -> None:
        """Under pytest-xdist (``-n``) the workers collect: each collects the same tests."""
        if not self.selected:
            self.select(ids)

    def select(self, ids) -> None:
        for nodeid in ids:
            problem = self.problem(nodeid)
            if problem:
                self.selected[problem] += 1

    def problem(self, nodeid: str) -> str | None:
        return problem_of(self.root / nodeid.split("::")[0])

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        report = yield
        if call.when in ("setup", "call") and call.excinfo is not None and (
                call.excinfo.errisinstance(NotImplementedYet) or call.excinfo.errisinstance(NotImplementedError)
                and unwritten(call.excinfo.value, self.package)):
            match = _SECTION.search(str(call.excinfo.value))
            report.not_implemented = match.group(1) if match else str(call.excinfo.value).splitlines()[0]
        return report

    def pytest_report_teststatus(self, report: pytest.TestReport):
        if getattr(report, "not_implemented", None):
            return NOT_IMPLEMENTED, "N", ("NOT IMPLEMENTED", {"yellow": True})
        return None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        problem = self.problem(report.nodeid)
        if problem and (report.when == "call" or (report.when == "setup" and not report.passed)):
            outcome = NOT_IMPLEMENTED if getattr(report, "not_implemented", None) else report.outcome
            self.counts[(problem, "total")] += 1
            self.counts[(problem, outcome)] += 1
            if outcome == NOT_IMPLEMENTED:
                self.todo[report.not_implemented] = None

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session):
        result = yield  # the terminal reporter's summary has been written: the table comes last
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if self.counts and reporter is not None:
            self.write_table(reporter)
        return result

    def write_table(self, reporter) -> None:
        write = reporter.write_line
        reporter.section("public tests per problem")
        columns = ("passed", "failed", NOT_IMPLEMENTED, "skipped", "not run", "total")
        write(f"{'problem':<14}" + "".join(f"{c:>{len(c) + 2}}" for c in columns))
        for problem, module in PROBLEMS.items():
            if self.counts[(problem, "total")]:
                row = {**{c: self.counts[(problem, c)] for c in columns}, "total": self.selected[problem],
                       "not run": self.selected[problem] - self.counts[(problem, "total")]}
                write(f"{problem + ' ' + module:<14}" + "".join(f"{row[c]:>{len(c) + 2}}" for c in columns))
        if any(self.selected[p] > self.counts[(p, "total")] for p in PROBLEMS):
            write("Not run: the run stopped early (-x, or interrupted) before these selected tests.")
        ran = [module for problem, module in PROBLEMS.items() if self.counts[(problem, "total")]]
        todo = dict.fromkeys([*self.todo, *(s for module in ran for s in stub_sections(self.package / f"{module}.py"))])
        if todo:
            text = "Not implemented yet (handout.md sections): " + ", ".join(todo)
            for line in textwrap.wrap(text, width=100, subsequent_indent="    "):
                write(line)
        write("Passing the public tests is a good sign, not a grade: hidden tests check more (handout.md, 'Grading').")
