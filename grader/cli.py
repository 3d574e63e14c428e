"""The ``grader`` command: each subcommand forwards to one module's keyword-only ``main``.

Defaults come from each ``main``'s own keyword defaults, so the command line and the Python
API cannot disagree.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Any, Callable


def _defaults(module: str) -> dict[str, Any]:
    return importlib.import_module(f"grader.{module}").main.__kwdefaults__ or {}


def _problems(text: str) -> list[str]:
    keys = [part.strip().upper() for part in text.split(",") if part.strip()]
    bad = [k for k in keys if k not in {f"P{i}" for i in range(1, 9)}]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown problem(s) {', '.join(bad)}: use P1..P8, comma-separated")
    return keys


def _grading_options(parser: argparse.ArgumentParser, defaults: dict[str, Any]) -> None:
    parser.add_argument("--gpu", choices=("auto", "require", "off"), default=defaults["gpu"],
                        help="auto: run GPU tests when CUDA is present (else 'not run', grade provisional); "
                             "require: fail fast without CUDA; off: never run them")
    parser.add_argument("--seed", type=int, default=defaults["seed"], help="hypothesis seed (reproducible grading)")
    parser.add_argument("--problems", type=_problems, default=defaults["problems"], help="only these, e.g. P1,P3")
    parser.add_argument("--budget-seconds", type=float, default=defaults["budget_seconds"],
                        help="time budget for one whole submission")
    parser.add_argument("--call-seconds", type=float, default=defaults["call_seconds"],
                        help="wall-clock limit of one call into student code")
    parser.add_argument("--memory-mb", type=int, default=defaults["memory_mb"], help="worker memory cap (a cgroup counting shared memory and tmpfs where the host gives one, else watched)")
    parser.add_argument("--profile", choices=("grading", "ci"), default=defaults["profile"],
                        help="hypothesis profile: grading (more examples) or ci (fast, derandomized)")
    parser.add_argument("--isolation", choices=("auto", "require-strong"), default="auto",
                        help="auto: the strongest containment this host gives; require-strong: refuse to grade "
                             "without namespaces, a syscall filter and a kernel memory limit")


def _isolation_allows(choice: str) -> bool:
    """False (with a one-line reason) when ``require-strong`` is asked of a host that cannot give it."""
    if choice != "require-strong":
        return True
    from .containment.level import host

    level = host()
    if not level.strong:
        print(f"grader: this host gives {level.mechanism}, not strong isolation; it lacks "
              + "; ".join(level.lacks), file=sys.stderr)
    return level.strong


def _grade(sub: argparse._SubParsersAction) -> Callable[..., int]:
    defaults = _defaults("grade")
    parser = sub.add_parser("grade", help="grade one submission in a sandboxed worker")
    parser.add_argument("submission", help="folder with an assignment/ package, folder of modules, or .zip")
    parser.add_argument("--out", type=Path, default=defaults["out"], help="write Gradescope results.json here")
    parser.add_argument("--jobs", type=int, default=defaults["jobs"], help="judge sessions in parallel")
    parser.add_argument("--in-process", action="store_true",
                        help="UNSAFE: run student code inside the judge (debugging the kit only; never to grade)")
    _grading_options(parser, defaults)
    return lambda a: 2 if not _isolation_allows(a.isolation) else importlib.import_module("grader.grade").main(
        a.submission, out=a.out, gpu=a.gpu, jobs=a.jobs, seed=a.seed, in_process=a.in_process,
        budget_seconds=a.budget_seconds, call_seconds=a.call_seconds, memory_mb=a.memory_mb,
        problems=a.problems, profile=a.profile)


def _stubs(sub: argparse._SubParsersAction) -> Callable[..., int]:
    parser = sub.add_parser("stubs", help="regenerate assignment/ from solutions/ (or --check that it is current)")
    parser.add_argument("--check", action="store_true", help="only report stale stubs; exit 1 if any")
    return lambda a: importlib.import_module("grader.stubs").main(check=a.check)


def _release(sub: argparse._SubParsersAction) -> Callable[..., int]:
    parser = sub.add_parser("release", help="write the student repository (stubs, public tests, handout) and verify it")
    parser.add_argument("out", help="a new or empty folder")
    return lambda a: importlib.import_module("grader.release").main(a.out)


def _selfcheck(sub: argparse._SubParsersAction) -> Callable[..., int]:
    defaults = _defaults("selfcheck")
    parser = sub.add_parser("selfcheck", help="prove the kit: reference 100, stubs 0, mutants killed, attacks "
                                              "contained, release clean")
    parser.add_argument("--jobs", type=int, default=defaults["jobs"], help="gradings in parallel")
    parser.add_argument("--full", action="store_true", help="grade every problem for every mutant")
    parser.add_argument("--quick", action="store_true", help="the attack subset CI runs (see README)")
    parser.add_argument("--mutants", type=lambda s: s.split(","), default=defaults["mutants"],
                        help="only these mutant ids or problems (comma-separated)")
    parser.add_argument("--sections", type=lambda s: s.split(","), default=defaults["sections"],
                        help="independence,reference,stubs,mutants,attacks,release (default: all)")
    return lambda a: importlib.import_module("grader.selfcheck").main(
        jobs=a.jobs, full=a.full, quick=a.quick, mutants=a.mutants, sections=a.sections)


def _shard(text: str) -> str:
    from .batch import parse_shard

    try:
        parse_shard(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _batch(sub: argparse._SubParsersAction) -> Callable[..., int]:
    defaults = _defaults("batch")
    parser = sub.add_parser("batch", help="grade a class: every submission in a folder, a fresh judge each, "
                                          "resumable, shardable")
    parser.add_argument("submissions", help="folder with one entry per student (a folder or a .zip; its name is "
                                            "the student id), or a .zip/.tar.gz of such a folder")
    parser.add_argument("--out", type=Path, required=True, help="results go to OUT/results/<student>.json")
    parser.add_argument("--jobs", type=int, default=defaults["jobs"], help="submissions graded at once")
    parser.add_argument("--shard", type=_shard, default=defaults["shard"],
                        help="grade only shard I of N (I/N, 1-based): students whose id hashes to it")
    parser.add_argument("--timeout-seconds", type=float, default=defaults["timeout_seconds"],
                        help="wall-clock limit for one submission (then it is stopped: an error row)")
    parser.add_argument("--retry-errors", action="store_true", help="regrade error rows even if unchanged")
    _grading_options(parser, defaults)
    return lambda a: 2 if not _isolation_allows(a.isolation) else importlib.import_module("grader.batch").main(
        a.submissions, out=a.out, jobs=a.jobs, shard=a.shard, gpu=a.gpu, seed=a.seed, problems=a.problems,
        profile=a.profile, budget_seconds=a.budget_seconds, call_seconds=a.call_seconds, memory_mb=a.memory_mb,
        timeout_seconds=a.timeout_seconds, retry_errors=a.retry_errors)


def _gradebook(sub: argparse._SubParsersAction) -> Callable[..., int]:
    defaults = _defaults("gradebook")
    parser = sub.add_parser("gradebook", help="merge batch result folders (shards, re-runs) into a CSV, a summary "
                                              "and a histogram")
    parser.add_argument("folders", nargs="+", metavar="OUT_DIR", help="batch output folders (or folders holding them)")
    parser.add_argument("--csv", type=Path, default=defaults["csv"],
                        help="the gradebook; the summary (.md) and histogram (.png) are written beside it")
    return lambda a: importlib.import_module("grader.gradebook").main(a.folders, csv=a.csv)


def _gradescope_bundle(sub: argparse._SubParsersAction) -> Callable[..., int]:
    defaults = _defaults("bundle")
    parser = sub.add_parser("gradescope-bundle", help="write a Gradescope autograder zip grading through the judge")
    parser.add_argument("out", help="the .zip to write")
    parser.add_argument("--gpu", choices=("auto", "require", "off"), default=defaults["gpu"],
                        help="GPU mode of run_autograder (Gradescope has no GPU: auto marks grades provisional)")
    parser.add_argument("--profile", choices=("grading", "ci"), default=defaults["profile"], help="hypothesis profile")
    parser.add_argument("--torch", default=defaults["torch"], help="what setup.sh pip-installs for torch")
    parser.add_argument("--torch-index-url", default=defaults["torch_index_url"],
                        help="package index for torch ('' for PyPI's default)")
    return lambda a: importlib.import_module("grader.bundle").main(
        a.out, gpu=a.gpu, profile=a.profile, torch=a.torch, torch_index_url=a.torch_index_url)


COMMANDS = [_grade, _stubs, _release, _selfcheck, _batch, _gradebook, _gradescope_bundle]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grader", description="Instructor tooling for the resource-accounting kit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    handlers = {}
    for command in COMMANDS:
        before = set(sub.choices)
        handler = command(sub)
        for name in set(sub.choices) - before:
            handlers[name] = handler
    parser.set_defaults(_handlers=handlers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args._handlers[args.command](args)
    except KeyboardInterrupt:
        print("grader: interrupted; nothing half-written was kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
