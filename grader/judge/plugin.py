"""The pytest plugin that runs hidden suites in the judge.

It provides the ``sub`` fixture (a ``handle.Submission``), reads each test's
``@pytest.mark.points(n)`` and problem (from the file name ``test_p<N>_<module>.py``),
marks GPU tests "not run" where no GPU is used (and, with ``--gpu only``, every other test:
the CPU pass grades those), and keeps one plain record per test (``grader.record.TestRecord``).
Messages keep only the assertion text (never hidden-suite source or tracebacks). A failed
test's message starts with the known mistakes its recorded behaviour reproduces, if any
(``grader.judge.diagnosis``; ``TestRecord.mistakes``). The file it writes (``--judge-report``) is the judge's
report, a ``grader.record.JudgeReport``. The grading options record (``--grading-options``) is its one
option: hypothesis's profile and seed come from it too.

It fails closed: every collected test starts as an "error" (not judged) and becomes "passed"
only when the judge saw its call pass; the judge's report says whether the session ended
normally (``complete``), and ``grade`` awards nothing from a session that did not.

Each problem gets its share of the session's time budget as its first test starts
(``grader.judge.budget``): calls into the submission stop at its end, and the problem's tests that
start after it fail, not run, with "P1 used up its time budget".
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from . import handle
from .budget import Budget
from .diagnosis.schedule import Schedule
from ..options import GradingOptions
from ..problems import PROBLEMS, suite_problem
from ..record import NOT_JUDGED, JudgeReport, TestRecord
from ..rules import quote

NOT_RUN_GPU = "not run: needs a GPU (graded on a GPU runner)"
NOT_RUN_CPU = "not run: graded by the CPU pass (this pass, --gpu only, runs the GPU tests alone)"
STOPPED = "not run: grading stopped at the first failed test"
MAX_MESSAGE = 1500


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("grader", "hidden-suite judge")
    group.addoption("--submission", help="staged submission package folder")
    group.addoption("--grading-options", type=_options, default=GradingOptions(),
                    help="the grading options record (GradingOptions.to_json): gpu, limits, budget, diagnosis...")
    group.addoption("--judge-report", help="write the judge's report (JSON, a grader.record.JudgeReport) here")
    group.addoption("--mask", action="append", default=[], help="path the worker must not see (repeatable)")


def _options(text: str) -> GradingOptions:
    try:
        return GradingOptions.from_json(text)
    except ValueError as exc:
        raise pytest.UsageError(f"--grading-options: {exc}") from None


def options_of(config: pytest.Config) -> GradingOptions:
    """The grading options this judge session was given (the kit's defaults when none)."""
    return config.getoption("--grading-options")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    options = options_of(config)
    # hypothesis's pytest plugin, configured after this hook, loads the record's profile and forces its seed
    config.option.hypothesis_profile, config.option.hypothesis_seed = options.profile, str(options.seed)
    config.addinivalue_line("markers", "points(n): points this hidden test is worth")
    config.addinivalue_line("markers", "gpu: needs CUDA; not run (grade provisional) without one")
    config.addinivalue_line("markers", "rule(*ids): the handout rules this test checks; a failure quotes them")
    if options.first_failure:
        config.option.maxfail = 1
    if config.getoption("--submission"):
        config.pluginmanager.register(Recorder(config), "grader-recorder")


@pytest.fixture(scope="session")
def sub(request: pytest.FixtureRequest) -> Iterator[handle.Submission]:
    """The submission under test, served by the Recorder that ``--submission`` registers."""
    recorder = request.config.pluginmanager.get_plugin("grader-recorder")
    if recorder is None:
        raise pytest.UsageError("the sub fixture needs --submission")
    yield from recorder.sub()


def gpu_in_use(config: pytest.Config) -> bool:
    mode = options_of(config).gpu
    if mode == "off":
        return False
    import torch

    available = torch.cuda.is_available()
    if mode in ("require", "only") and not available:
        raise pytest.UsageError(f"--gpu {mode}: no CUDA device is available")
    return available


def refuse_weak_isolation(options: GradingOptions) -> None:
    """``isolation = "require-strong"`` on a host that cannot give it: no grading."""
    if options.isolation != "require-strong" or options.in_process:
        return
    from ..containment.level import host

    level = host()
    if not level.strong:
        raise pytest.UsageError(f"--isolation require-strong, but this host gives {level.mechanism}; "
                                f"it lacks {'; '.join(level.lacks)}")


def problem_of(item: pytest.Item) -> tuple[str, str]:
    key = suite_problem(item.path.name)
    if key is None:
        raise pytest.UsageError(f"hidden test file {item.path.name} is not named test_p<N>_<module>.py")
    return key, PROBLEMS[key].module


def points_of(item: pytest.Item) -> float:
    marker = item.get_closest_marker("points")
    if marker is None or not marker.args:
        raise pytest.UsageError(f"hidden test {item.nodeid} has no @pytest.mark.points(n)")
    return float(marker.args[0])


def rules_of(item: pytest.Item) -> tuple[str, ...]:
    """The handout rule ids a hidden test names with ``@pytest.mark.rule(...)``, in order."""
    return tuple(dict.fromkeys(i for marker in item.iter_markers("rule") for i in marker.args))


def skip_reason(longrepr: object) -> str:
    """Why a test skipped itself (``pytest.skip(reason)``: pytest keeps (path, line, "Skipped: reason")), said
    as a test not run."""
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else ""
    reason = str(reason).removeprefix("Skipped: ").strip()
    return reason if reason.lower().startswith("not run") else f"not run: {reason}" if reason else "not run"


def clean_message(longrepr: object) -> str:
    """The failure's own message: no source lines, no traceback, no assertion rewriting."""
    crash = getattr(longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(longrepr)
    text = re.sub(r"^(?:[\w.]+\.)?(?:StudentError|OutOfTime|AssertionError|Failed): ?", "", text)
    text = text.split("\nassert ", 1)[0]
    text = re.sub(r"\n\s*sub=<[^>\n]*>,", "", text)  # hypothesis lists the fixture among the arguments
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 15] + "...[truncated]"


class Recorder:
    """Builds the ``sub`` fixture's backend and keeps each test's record."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.records: dict[str, TestRecord] = {}
        self.rules: dict[str, tuple[str, ...]] = {}  # the handout rules each collected test checks
        self.submission: handle.Submission | None = None
        self.options = options_of(config)
        refuse_weak_isolation(self.options)
        self.use_gpu = gpu_in_use(config)
        self.gpu_only = self.options.gpu == "only"
        self.budget = Budget(self.options.budget_seconds)
        # Known mistakes are named where the options ask for more than verdicts (grader.judge.diagnosis).
        self.diagnosis = Schedule(self.budget, clean_message) if self.options.diagnose and not self.options.first_failure \
            else None
        self.order: list[str] = []  # the problems with tests to run, in the order their tests run

    def sub(self) -> Iterator[handle.Submission]:
        """The ``sub`` fixture's body: the submission's backend, open for the whole session."""
        folder = Path(self.config.getoption("--submission"))
        if self.options.in_process:
            from .inprocess import InProcess

            backend: handle.Backend = InProcess(folder)
        else:
            from ..containment.limits import Limits
            from ..containment.worker import Worker

            backend = Worker(folder, Limits.of(self.options), masks=[Path(p) for p in self.config.getoption("--mask")])
        submission = handle.Submission(backend, folder, self.budget, self.options.call_seconds)
        self.submission = submission
        yield submission
        backend.close()
        self.isolation = {**submission.withheld_isolation, **backend.isolation}
        self.import_error = str(backend.import_error) if backend.import_error else ""

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        if self.options.rules is not None:  # a rule's kill: only the tests that check it
            kept = [item for item in items if set(rules_of(item)) & set(self.options.rules)]
            self.config.hook.pytest_deselected(items=[item for item in items if item not in kept])
            items[:] = kept
        self.rules = {item.nodeid: rules_of(item) for item in items}
        for item in items:
            problem, module = problem_of(item)
            doc = (getattr(item.obj, "__doc__", None) or "").strip().splitlines()
            self.records[item.nodeid] = TestRecord(
                nodeid=item.nodeid, problem=problem, module=module, name=doc[0] if doc else item.name,
                points=points_of(item), status="error", message=NOT_JUDGED, duration=0.0,
                gpu=item.get_closest_marker("gpu") is not None)
            reason = self.not_run_reason(self.records[item.nodeid].gpu)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))
        self.order = list(dict.fromkeys(o.problem for o in self.records.values() if not self.not_run_reason(o.gpu)))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Freeze what the session holds now (torch, the suites, their strategies): the garbage collector never
        walks it again, only what the tests make (hypothesis collects before each test's first example)."""
        gc.freeze()

    def not_run_reason(self, gpu: bool) -> str:
        """Why a test is not run in this session ("" when it is run): the other pass grades it."""
        if gpu and not self.use_gpu:
            return NOT_RUN_GPU
        return NOT_RUN_CPU if self.gpu_only and not gpu else ""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """The first test of a problem starts its share of the time budget (``grader.judge.budget``); once
        that is spent, the problem's tests are not run: they fail, saying so."""
        record = self.records[item.nodeid]
        if self.not_run_reason(record.gpu):
            return
        self.budget.start(record.problem, later=len(self.order) - 1 - self.order.index(record.problem))
        if self.budget.spent():
            record.status, record.message = "failed", f"not run: {self.budget.why()}"
            pytest.fail(record.message, pytrace=False)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        record = self.records.get(report.nodeid)
        if record is None:
            return
        record.duration += report.duration
        if report.failed and record.status != "failed":
            record.status = "failed"
            record.message = clean_message(report.longrepr)
            if self.rules.get(report.nodeid):
                record.message += "\n" + quote(self.rules[report.nodeid])
            if report.when != "call":
                record.message = f"(during {report.when}) {record.message}"
            elif self.diagnosis is not None and self.submission is not None:
                self.diagnosis.failed(record, self.submission)
        elif report.skipped and record.status == "error":
            record.status, record.message = "not_run", self.not_run_reason(record.gpu) or skip_reason(report.longrepr)
        elif report.passed and report.when == "call" and record.status == "error":
            record.status, record.message = "passed", ""

        if report.when == "teardown" and self.submission is not None:
            self.submission.recording = handle.Recording()  # the next test records afresh

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.diagnosis is not None and self.submission is not None:
            self.diagnosis.finish(self.submission)
        path = self.config.getoption("--judge-report")
        if path:
            complete = int(exitstatus) in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
            stopped = bool(session.shouldfail) and self.options.first_failure
            if stopped:  # judged: a test failed, and those after it were deliberately not run
                for record in self.records.values():
                    if record.status == "error" and record.message == NOT_JUDGED:
                        record.status, record.message = "not_run", STOPPED
            report = JudgeReport(
                complete=complete and not session.shouldstop and (stopped or not session.shouldfail),
                tests=list(self.records.values()), isolation=getattr(self, "isolation", {}),
                import_error=getattr(self, "import_error", ""))
            Path(path).write_text(report.to_json())
