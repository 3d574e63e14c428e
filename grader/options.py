"""How a submission is graded: the options, their defaults and their checks (here only).

``GradingOptions`` is what ``grader grade``, ``grader batch``, the Gradescope bundle, the attack
check and the Python API share. Every value is checked once, as the record is built (the same
checks and one-line reasons as the command line: ``grade(path, memory_mb=10)`` is refused as
``--memory-mb 10`` is). The CLI builds it from its parsed arguments (``from_args``); it crosses to
each judge session as one versioned JSON record (``to_json`` / ``from_json``: the plugin's one
option ``--grading-options``), and ``batch`` and the attack check give it to ``grader grade``'s
command line (``to_argv``).

Adding an option: a field here (default, check in ``__post_init__``) and its flag in
``cli._grading_options``; the judge, containment and batch read the record.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

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
class GradingOptions:
    """One grading's settings; every field's default is the kit's default."""

    gpu: str = "auto"  # one of GPU_MODES
    seed: int = 0  # hypothesis seed
    problems: tuple[str, ...] | None = None  # only these problems (keys of PROBLEMS); None: all
    profile: str = "grading"  # hypothesis profile
    budget_seconds: float = 900.0  # the wall for one whole submission, start-up included
    call_seconds: float = 30.0  # the wall-clock limit of one call into student code
    memory_mb: int = 4096  # the worker's memory cap
    not_run: str = "exclude"  # how tests not run count in results.json (one of NOT_RUN_MODES)
    in_process: bool = False  # UNSAFE: student code runs in the judge (debugging the kit only)
    first_failure: bool = False  # each judge stops at its first failed test (mutation verdicts)
    rules: tuple[str, ...] | None = None  # only the hidden tests that check these handout rules (a rule's kill); None: all
    diagnose: bool = True  # name the known mistake a failed test reproduces (off: verdicts alone, e.g. a kill matrix)
    isolation: str = "auto"  # one of ISOLATION_MODES; require-strong: refuse to grade without strong containment

    def __post_init__(self) -> None:
        for name, allowed in (("gpu", GPU_MODES), ("not_run", NOT_RUN_MODES), ("profile", (*PROFILES, "verdict")),
                              ("isolation", ISOLATION_MODES)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"--{name.replace('_', '-')}: invalid choice {getattr(self, name)!r} "
                                 f"(choose from {', '.join(allowed)})")
        for name, check in (("seed", arguments.seed_value), ("budget_seconds", arguments.seconds_value),
                            ("call_seconds", arguments.seconds_value), ("memory_mb", arguments.memory_mb_value)):
            try:
                check(getattr(self, name))
            except (TypeError, ValueError) as exc:
                raise ValueError(f"--{name.replace('_', '-')}: {exc}") from None
        if self.call_seconds > self.budget_seconds:
            raise ValueError(f"--call-seconds {self.call_seconds:g} exceeds --budget-seconds {self.budget_seconds:g}")
        if self.rules is not None:
            object.__setattr__(self, "rules", tuple(arguments.rule_ids(self.rules)))
        if self.problems is not None:
            try:
                keys = arguments.problems_value([str(key).upper() for key in self.problems])
            except ValueError as exc:
                raise ValueError(f"--problems: {exc}") from None
            object.__setattr__(self, "problems", tuple(sorted(keys)))

    @classmethod
    def from_args(cls, args: argparse.Namespace, base: GradingOptions | None = None) -> GradingOptions:
        """The options a parsed command line gives; those it lacks are ``base``'s (default: the kit's)."""
        given = {f.name: getattr(args, f.name) for f in fields(cls) if hasattr(args, f.name)}
        return replace(base or cls(), **given)

    def graded_with(self) -> dict[str, Any]:
        """How a result was graded, as results.json records it (``extra_data.options``); the seed only where
        the profile draws from it (a derandomized profile's examples are the same whatever the seed)."""
        return dict(gpu=self.gpu, seed=None if self.profile in DERANDOMIZED else self.seed, profile=self.profile,
                    budget_seconds=self.budget_seconds, call_seconds=self.call_seconds, memory_mb=self.memory_mb,
                    problems=list(self.problems) if self.problems else None)

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
        for name in ("problems", "rules"):
            if data[name] is not None:
                data[name] = tuple(data[name])
        return cls(**data)

    def to_argv(self) -> list[str]:
        """The options of a ``grader grade`` command line that grades with these options."""
        argv = ["--gpu", self.gpu, "--seed", str(self.seed), "--profile", self.profile,
                "--budget-seconds", str(self.budget_seconds), "--call-seconds", str(self.call_seconds),
                "--memory-mb", str(self.memory_mb), "--not-run", self.not_run]
        argv += ["--problems", ",".join(self.problems)] if self.problems else []
        return argv + (["--in-process"] if self.in_process else []) + (
            ["--isolation", self.isolation] if self.isolation != "auto" else [])

    def judge_argv(self, budget_seconds: float) -> list[str]:
        """The options of a judge session (pytest with ``grader.judge.plugin``) with ``budget_seconds`` of its
        own: the record, and hypothesis's own flags for its profile and seed."""
        record = replace(self, budget_seconds=budget_seconds, call_seconds=min(self.call_seconds, budget_seconds))
        return ["--grading-options", record.to_json(), "--hypothesis-profile", self.profile,
                "--hypothesis-seed", str(self.seed)]
