"""How a submission is graded: the options, their defaults (here only) and their command lines.

``GradingOptions`` is what ``grader grade``, ``grader batch``, the Gradescope bundle and the
attack check share: the CLI builds it from its parsed arguments (``from_args``), ``grade``
turns it into each judge session's command line (``judge_argv``) and ``batch`` and the attack
check into ``grader grade``'s (``to_argv``).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields, replace
from typing import Any

GPU_MODES = ("auto", "require", "off", "only")  # only: the GPU tests alone (a class's GPU pass)
NOT_RUN_MODES = ("exclude", "zero")
PROFILES = ("grading", "ci")  # hypothesis profiles a user may pick ("verdict" is the mutation tools' own)
# Judges and workers let OpenMP's idle threads sleep between torch's parallel regions (where the
# environment does not say otherwise): spinning there burns CPU time, and changes no result.
OMP_WAIT_POLICY = "PASSIVE"


@dataclass(frozen=True)
class GradingOptions:
    """One grading's settings; every field's default is the kit's default."""

    gpu: str = "auto"  # one of GPU_MODES
    seed: int = 0  # hypothesis seed
    problems: tuple[str, ...] | None = None  # only these problems (P1..P8); None: all
    profile: str = "grading"  # hypothesis profile
    budget_seconds: float = 900.0  # the wall for one whole submission, start-up included
    call_seconds: float = 30.0  # the wall-clock limit of one call into student code
    memory_mb: int = 4096  # the worker's memory cap
    not_run: str = "exclude"  # how tests not run count in results.json (one of NOT_RUN_MODES)
    in_process: bool = False  # UNSAFE: student code runs in the judge (debugging the kit only)
    first_failure: bool = False  # each judge stops at its first failed test (mutation verdicts)
    diagnose: bool = True  # name the known mistake a failed test reproduces (off: verdicts alone, e.g. a kill matrix)

    def __post_init__(self) -> None:
        if self.gpu not in GPU_MODES:
            raise ValueError(f"gpu mode {self.gpu!r}: use one of {', '.join(GPU_MODES)}")
        if self.not_run not in NOT_RUN_MODES:
            raise ValueError(f"not_run {self.not_run!r}: use one of {', '.join(NOT_RUN_MODES)}")
        if self.problems is not None:
            object.__setattr__(self, "problems", tuple(sorted(self.problems)))

    @classmethod
    def from_args(cls, args: argparse.Namespace, base: GradingOptions | None = None) -> GradingOptions:
        """The options a parsed command line gives; those it lacks are ``base``'s (default: the kit's)."""
        given = {f.name: getattr(args, f.name) for f in fields(cls) if hasattr(args, f.name)}
        return replace(base or cls(), **given)

    def graded_with(self) -> dict[str, Any]:
        """How a result was graded, as results.json records it (``extra_data.options``)."""
        return dict(gpu=self.gpu, seed=self.seed, profile=self.profile, budget_seconds=self.budget_seconds,
                    call_seconds=self.call_seconds, memory_mb=self.memory_mb,
                    problems=list(self.problems) if self.problems else None)

    def to_argv(self) -> list[str]:
        """The options of a ``grader grade`` command line that grades with these options."""
        argv = ["--gpu", self.gpu, "--seed", str(self.seed), "--profile", self.profile,
                "--budget-seconds", str(self.budget_seconds), "--call-seconds", str(self.call_seconds),
                "--memory-mb", str(self.memory_mb), "--not-run", self.not_run]
        argv += ["--problems", ",".join(self.problems)] if self.problems else []
        return argv + (["--in-process"] if self.in_process else [])

    def judge_argv(self, budget_seconds: float) -> list[str]:
        """The options of a judge session (pytest with ``grader.judge.plugin``) with ``budget_seconds`` of its own."""
        argv = ["--gpu", self.gpu, "--call-seconds", str(self.call_seconds), "--budget-seconds", str(budget_seconds),
                "--memory-mb", str(self.memory_mb), "--hypothesis-profile", self.profile,
                "--hypothesis-seed", str(self.seed)]
        return argv + (["--in-process"] if self.in_process else []) + (
            ["--first-failure"] if self.first_failure else []) + ([] if self.diagnose else ["--no-diagnosis"])
