"""How a submission is graded: the options, their defaults, flags and checks (here only, each once).

``GradingOptions`` is what ``grader grade``, ``grader batch``, the Gradescope bundle, the attack
check and the Python API share. Each field carries its ``Option`` (its metadata): the flag's help,
type and choices, the record's check, and whether results.json records it. From it come the command
line's flags (``cli._grading_options``), ``to_argv``, ``graded_with`` and the record's checks: every
value is checked once, as the record is built (the same checks and one-line reasons as the command
line: ``grade(path, memory_mb=10)`` is refused as ``--memory-mb 10`` is). The CLI builds it from its
parsed arguments (``from_args``); it crosses to each judge session as one versioned JSON record
(``to_json`` / ``from_json``: the plugin's one option ``--grading-options``, from which the judge
also sets hypothesis's profile and seed), and ``batch`` and the attack check give it to ``grader
grade``'s command line (``to_argv``).

Adding an option: a field here, its default and its ``Option``; the judge, containment and batch
read the record.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Callable

from . import arguments

GPU_MODES = ("auto", "require", "off", "only")  # only: the GPU tests alone (a class's GPU pass)
NOT_RUN_MODES = ("exclude", "zero")
PROFILES = ("grading", "ci")  # hypothesis profiles a user may pick ("verdict" is the mutation tools' own)
DERANDOMIZED = ("ci", "verdict")  # profiles whose examples do not depend on the seed (grader/judge/hidden/conftest.py)
ISOLATION_MODES = ("auto", "require-strong")
RECORD_VERSION = 1
# Judges and workers let OpenMP's idle threads sleep between torch's parallel regions (where the
# environment does not say otherwise): spinning there burns CPU time, and changes no result.
OMP_WAIT_POLICY = "PASSIVE"


@dataclass(frozen=True)
class Option:
    """How one field of ``GradingOptions`` is given, checked and recorded (the field's metadata)."""

    help: str = ""  # the flag's help; "" where no command line sets it (the kit's own tools do)
    check: Callable[[Any], Any] | None = None  # the value, normalised; ValueError (or TypeError) with the reason
    parse: Callable[[str], Any] | None = None  # the flag's argparse type (grader/arguments.py)
    choices: tuple[str, ...] = ()  # the flag's choices; without a check, the only values the record takes
    recorded: bool = False  # results.json records it (``graded_with``)
    argv_at_default: bool = True  # ``to_argv`` writes it at its default too (else only when it differs)

    def checked(self, value: Any) -> Any:
        """``value`` checked (and normalised) as the record takes it."""
        check = self.check or (arguments.one_of(*self.choices) if self.choices else None)
        return check(value) if check else value


def flag(name: str) -> str:
    """The command-line flag of the field ``name``: ``memory_mb`` -> ``--memory-mb``."""
    return "--" + name.replace("_", "-")


def option(name: str) -> Option:
    """The metadata of the field ``name`` of ``GradingOptions``."""
    return next(f.metadata["option"] for f in fields(GradingOptions) if f.name == name)


def _field(default: Any, **metadata: Any) -> Any:
    return field(default=default, metadata={"option": Option(**metadata)})


def _problem_keys(keys: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    return tuple(sorted(arguments.problems_value([str(key).upper() for key in keys])))


def _rule_ids(ids: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    return tuple(arguments.rule_ids(ids))


@dataclass(frozen=True)
class GradingOptions:
    """One grading's settings; every field's default is the kit's default."""

    gpu: str = _field("auto", choices=GPU_MODES, recorded=True,
                      help="auto: run GPU tests when CUDA is present (else 'not run', grade provisional); "
                           "require: fail fast without CUDA; off: never run them; only: run the GPU tests "
                           "alone, the others 'not run' (a class's GPU pass, merged by grader gradebook; "
                           "fails fast without CUDA)")
    seed: int = _field(0, check=arguments.seed_value, parse=arguments.seed, recorded=True,
                       help="hypothesis seed (reproducible grading)")
    profile: str = _field("grading", choices=PROFILES, check=arguments.one_of(*PROFILES, "verdict"), recorded=True,
                          help="hypothesis profile: grading (more examples) or ci (fast, derandomized)")
    budget_seconds: float = _field(900.0, check=arguments.seconds_value, parse=arguments.seconds, recorded=True,
                                   help="time budget for one whole submission")  # the wall, start-up included
    call_seconds: float = _field(30.0, check=arguments.seconds_value, parse=arguments.seconds, recorded=True,
                                 help="wall-clock limit of one call into student code")
    memory_mb: int = _field(4096, check=arguments.memory_mb_value, parse=arguments.memory_mb, recorded=True,
                            help="worker memory cap (a cgroup counting shared memory and tmpfs where the host gives "
                                 "one, else watched)")
    problems: tuple[str, ...] | None = _field(None, check=_problem_keys, parse=arguments.problems, recorded=True,
                                              help="only these, e.g. P1,P3")  # None: all
    not_run: str = _field("exclude", choices=NOT_RUN_MODES,
                          help="tests not run (GPU tests without a GPU) in results.json: exclude (left out of the "
                               "possible points) or zero (0 out of their points); never shown as failures")
    in_process: bool = _field(False, help="UNSAFE: run student code inside the judge (debugging the kit only; "
                                          "never to grade)")
    first_failure: bool = _field(False)  # each judge stops at its first failed test (mutation verdicts)
    # only the hidden tests that check these handout rules (a rule's kill); None: all
    rules: tuple[str, ...] | None = _field(None, check=_rule_ids)
    # name the known mistake a failed test reproduces (off: verdicts alone, e.g. a kill matrix)
    diagnose: bool = _field(True)
    isolation: str = _field("auto", choices=ISOLATION_MODES, argv_at_default=False,
                            help="auto: the strongest containment this host gives; require-strong: refuse to grade "
                                 "without namespaces, a syscall filter and a kernel memory limit")

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None and f.default is None:
                continue
            try:
                object.__setattr__(self, f.name, f.metadata["option"].checked(value))
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{flag(f.name)}: {exc}") from None
        if self.call_seconds > self.budget_seconds:
            raise ValueError(f"--call-seconds {self.call_seconds:g} exceeds --budget-seconds {self.budget_seconds:g}")

    @classmethod
    def from_args(cls, args: argparse.Namespace, base: GradingOptions | None = None) -> GradingOptions:
        """The options a parsed command line gives; those it lacks are ``base``'s (default: the kit's)."""
        given = {f.name: getattr(args, f.name) for f in fields(cls) if hasattr(args, f.name)}
        return replace(base or cls(), **given)

    def graded_with(self) -> dict[str, Any]:
        """How a result was graded, as results.json records it (``extra_data.options``); the seed only where
        the profile draws from it (a derandomized profile's examples are the same whatever the seed)."""
        recorded = {f.name: _plain(getattr(self, f.name)) for f in fields(self) if f.metadata["option"].recorded}
        return {**recorded, "seed": None} if self.profile in DERANDOMIZED else recorded

    def to_json(self) -> str:
        """The record a judge session receives (``--grading-options``)."""
        return json.dumps({"version": RECORD_VERSION, **asdict(self)})

    @classmethod
    def from_json(cls, text: str) -> GradingOptions:
        """The record ``to_json`` wrote, checked again; ValueError for another version or a malformed one."""
        data = json.loads(text)
        names = {f.name for f in fields(cls)}
        if type(data) is not dict or data.get("version") != RECORD_VERSION or set(data) - {"version"} != names:
            raise ValueError(f"not a version-{RECORD_VERSION} grading options record")
        data.pop("version")
        return cls(**data)

    def to_argv(self) -> list[str]:
        """The options of a ``grader grade`` command line that grades with these options."""
        argv = []
        for f in fields(self):
            value, meta = getattr(self, f.name), f.metadata["option"]
            if not meta.help or value is None or value is False or (value == f.default and not meta.argv_at_default):
                continue
            argv += [flag(f.name)] if value is True else [flag(f.name), ",".join(value) if type(value) is tuple
                                                          else str(value)]
        return argv

    def judge_argv(self, budget_seconds: float) -> list[str]:
        """The options of a judge session (pytest with ``grader.judge.plugin``) with ``budget_seconds`` of its
        own: the record alone (the judge sets hypothesis's profile and seed from it)."""
        record = replace(self, budget_seconds=budget_seconds, call_seconds=min(self.call_seconds, budget_seconds))
        return ["--grading-options", record.to_json()]


def _plain(value: Any) -> Any:
    """A value as JSON holds it (a tuple as a list)."""
    return list(value) if type(value) is tuple else value


FLAGS = tuple(f.name for f in fields(GradingOptions) if f.metadata["option"].help)  # the fields a command line sets
