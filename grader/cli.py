"""The ``grader`` command: each subcommand forwards to one module's keyword-only ``main``.

Defaults come from each ``main``'s own keyword defaults, and the grading options' flags from the
fields of ``GradingOptions`` (each field's ``Option``: help, type or choices, default); the record is
built once from the parsed arguments by ``GradingOptions.from_args``, which checks every value, so the
command line and the Python API cannot disagree.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from . import arguments
from .options import FLAGS, GradingOptions, flag, option
from .grading.results import VISIBILITIES


def _defaults(module: str) -> dict[str, Any]:
    return importlib.import_module(f"grader.{module}").main.__kwdefaults__ or {}


GRADE_FLAGS: dict[str, dict[str, Any]] = {name: {} for name in FLAGS}  # every grading option a command line sets
BATCH_FLAGS = {name: {} for name in FLAGS if name != "in_process"}  # a class is never graded in process


def _grading_options(parser: argparse.ArgumentParser, flags: Mapping[str, Mapping[str, Any]],
                     defaults: GradingOptions = GradingOptions()) -> None:
    """One flag for each grading option ``flags`` names, from its field's ``Option`` with the changes it maps
    to (a command's own help or narrower choices), defaulting to ``defaults``'s value."""
    for name, changes in flags.items():
        meta, default = replace(option(name), **changes), getattr(defaults, name)
        kind: dict[str, Any] = (dict(action="store_true") if type(default) is bool else
                                dict(choices=meta.choices) if meta.choices else dict(type=meta.parse))
        parser.add_argument(flag(name), default=default, help=meta.help, **kind)
    parser.set_defaults(_grading_options=defaults)


def _grade(sub: argparse._SubParsersAction) -> Callable[..., int]:
    defaults = _defaults("grading.grade")
    parser = sub.add_parser("grade", help="grade one submission in a sandboxed worker")
    parser.add_argument("submission", help="folder with an assignment/ package, folder of modules, or .zip")
    parser.add_argument("--out", type=arguments.output_file, default=defaults["out"], help="write Gradescope results.json here")
    parser.add_argument("--jobs", type=arguments.jobs, default=defaults["jobs"], help="judge sessions in parallel")
    parser.add_argument("--junit", type=arguments.output_file, default=defaults["junit"],
                        help="also write JUnit XML here (one testcase per hidden test)")
    parser.add_argument("--visibility", choices=VISIBILITIES, default=defaults["visibility"],
                        help="Gradescope visibility of the results and every test (e.g. after_due_date)")
    parser.add_argument("--verbose", action="store_true", help="print the isolation obtained in full")
    _grading_options(parser, GRADE_FLAGS)
    return lambda a: importlib.import_module("grader.grading.grade").main(
        a.submission, options=a.grading_options, out=a.out, jobs=a.jobs, visibility=a.visibility,
        junit=a.junit, verbose=a.verbose)


def _stubs(sub: argparse._SubParsersAction) -> Callable[..., int]:
    parser = sub.add_parser("stubs", help="regenerate assignment/ from solutions/ (or --check that it is current)")
    parser.add_argument("--check", action="store_true", help="only report stale stubs; exit 1 if any")
    return lambda a: importlib.import_module("grader.release.stubs").main(check=a.check)


def _release(sub: argparse._SubParsersAction) -> Callable[..., int]:
    parser = sub.add_parser("release", help="write the student repository (stubs, public tests, handout) and verify it")
    parser.add_argument("out", type=arguments.output_folder, help="a new or empty folder")
    return lambda a: importlib.import_module("grader.release").main(a.out)


def _selfcheck(sub: argparse._SubParsersAction) -> Callable[..., int]:
    defaults = _defaults("selfproof.selfcheck")
    parser = sub.add_parser("selfcheck", help="prove the kit: reference 100, stubs 0, mutants killed, attacks "
                                              "contained, release clean")
    parser.add_argument("--jobs", type=arguments.jobs, default=defaults["jobs"], help="gradings in parallel")
    parser.add_argument("--full", action="store_true", help="grade every problem for every mutant")
    parser.add_argument("--quick", action="store_true", help="the attack subset CI runs (see README)")
    parser.add_argument("--mutants", type=lambda s: s.split(","), default=defaults["mutants"],
                        help="only these mutant ids or problems (comma-separated; for the rules section: "
                             "rule ids or problems)")
    parser.add_argument("--sections", type=arguments.sections, default=defaults["sections"],
                        help=f"{','.join(arguments.SECTIONS)} (default: all)")
    parser.add_argument("--gpu", action="store_true",
                        help="accept a GPU runner instead: reference 100 with every GPU test run, stubs 0, GPU-only "
                             "mutants killed, versions and GPU test times in one table (refuses without CUDA)")
    parser.add_argument("--out", type=arguments.output_folder, default=None,
                        help="with --gpu: keep the table and the reference's and stubs' results.json in this folder")
    return lambda a: (importlib.import_module("grader.selfproof.acceptance").main(jobs=a.jobs, out=a.out) if a.gpu else
                      importlib.import_module("grader.selfproof.selfcheck").main(
                          jobs=a.jobs, full=a.full, quick=a.quick, mutants=a.mutants, sections=a.sections))


def _batch(sub: argparse._SubParsersAction) -> Callable[..., int]:
    defaults = _defaults("classroom.batch")
    summary = ("grade a class: every submission in a folder, a fresh judge each, resumable, shardable; exit 1 when "
               "it finishes with error rows or unmatched files, 130 when stopped by SIGINT or SIGTERM (resumable; a "
               "background job of a script ignores SIGINT: use SIGTERM)")
    parser = sub.add_parser("batch", help=summary, description=summary)
    parser.add_argument("submissions", help="folder with one entry per student (a folder or a .zip; its name is "
                                            "the student id), a Gradescope export or Canvas download as it comes, "
                                            "or a .zip/.tar.gz of one of these")
    parser.add_argument("--out", type=arguments.output_folder, required=True, help="results go to OUT/results/<student>.json")
    parser.add_argument("--jobs", type=arguments.jobs, default=defaults["jobs"], help="submissions graded at once")
    parser.add_argument("--shard", type=arguments.shard, default=defaults["shard"],
                        help="grade only shard I of N (I/N, 1-based): students whose id hashes to it")
    parser.add_argument("--timeout-seconds", type=arguments.seconds, default=defaults["timeout_seconds"],
                        help="wall-clock limit for one submission (then it is stopped: an error row)")
    parser.add_argument("--retry-errors", action="store_true", help="regrade error rows even if unchanged")
    parser.add_argument("--only", type=arguments.students, default=defaults["only"], metavar="STUDENT[,STUDENT]",
                        help="regrade only these students, even if unchanged since graded (other results are kept)")
    _grading_options(parser, BATCH_FLAGS)
    return lambda a: importlib.import_module("grader.classroom.batch").main(
        a.submissions, options=a.grading_options, out=a.out, jobs=a.jobs, shard=a.shard,
        timeout_seconds=a.timeout_seconds, retry_errors=a.retry_errors, only=a.only)


def _gradebook(sub: argparse._SubParsersAction) -> Callable[..., int]:
    defaults = _defaults("classroom.gradebook")
    parser = sub.add_parser("gradebook", help="merge batch result folders (shards, re-runs) into a CSV, a summary "
                                              "and a histogram")
    parser.add_argument("folders", nargs="+", type=arguments.existing_folder, metavar="OUT_DIR", help="batch output folders (or folders holding them)")
    parser.add_argument("--csv", type=arguments.csv_file, default=defaults["csv"],
                        help="the gradebook; the summary (.md) and figures (.png, -problems.png) are written beside it")
    parser.add_argument("--roster", type=arguments.readable_csv, default=defaults["roster"],
                        help="CSV with a 'student' column: students without a submission become missing rows (0), "
                             "submissions not in it are flagged")
    parser.add_argument("--overrides", type=arguments.readable_csv, default=defaults["overrides"],
                        help="CSV of manual scores: student, problem or test, points, reason")
    parser.add_argument("--similarity", type=arguments.existing_folder, default=defaults["similarity"], metavar="DIR",
                        help="a grader similarity output: its pairs to review are listed in the summary")
    parser.add_argument("--late", type=arguments.readable_csv, default=defaults["late"], metavar="FILE",
                        help="YAML: a due date, free late days and a penalty per day, extensions by student "
                             "(docs/term.md); days late and penalties go into the totals, the CSV and the summary")
    lms = importlib.import_module("grader.classroom.gradebook.lms")
    parser.add_argument("--lms", choices=lms.KINDS, help="also write the totals for an LMS to import: canvas "
                                                         "(Canvas's gradebook columns, ids from --roster) or plain")
    parser.add_argument("--lms-out", type=arguments.csv_file, help="the LMS file (with --lms)")
    parser.add_argument("--lms-assignment", default=lms.Export.assignment, help="the assignment's column name")
    parser.add_argument("--missing", choices=lms.MISSING, default=lms.Export.missing,
                        help="what error and missing rows get in the LMS file: left blank, or 0")
    parser.add_argument("--provisional", choices=lms.PROVISIONAL, default=lms.Export.provisional,
                        help="what provisional rows (GPU tests not run) get in the LMS file: left blank, or their "
                             "total as it is; without it an LMS file with provisional rows is refused")
    return lambda a: importlib.import_module("grader.classroom.gradebook").main(
        a.folders, csv=a.csv, roster=a.roster, overrides=a.overrides, similarity=a.similarity, late=a.late,
        lms=lms.Export(a.lms, a.lms_out, a.lms_assignment, a.missing, a.provisional) if a.lms else None)


def _similarity(sub: argparse._SubParsersAction) -> Callable[..., int]:
    defaults = _defaults("classroom.similarity")
    parser = sub.add_parser("similarity", help="compare every pair of submissions (copydetect, the stubs left out), "
                                               "judged against the class's own pairs: clusters to review, a page "
                                               "for each, and a CSV of every pair")
    parser.add_argument("submissions", help="folder with one entry per student (as grader batch reads it), or an "
                                            "archive of one")
    parser.add_argument("--out", type=arguments.output_folder, required=True,
                        help="writes OUT/similarity.html and OUT/similarity.csv")
    parser.add_argument("--past", type=arguments.existing_folder, nargs="+", default=defaults["past"], metavar="DIR",
                        help="earlier terms' submissions or public solutions: compared with, not among themselves")
    parser.add_argument("--threshold", type=arguments.share, default=defaults["threshold"],
                        help="a pair is to review from this score (share of one side's own code found in the other)")
    parser.add_argument("--min-lines", type=arguments.jobs, default=defaults["min_lines"], metavar="N",
                        help="... and when at least N lines match")
    parser.add_argument("--margin", type=arguments.share, default=defaults["margin"],
                        help="... and when its score stands this far above the median of the class's other pairs "
                             "(how alike honest work of this handout is)")
    parser.add_argument("--jobs", type=arguments.jobs, default=defaults["jobs"], help="processes comparing at once")
    return lambda a: importlib.import_module("grader.classroom.similarity").main(
        a.submissions, out=a.out, past=tuple(a.past), threshold=a.threshold, min_lines=a.min_lines, margin=a.margin,
        jobs=a.jobs)


def _report(sub: argparse._SubParsersAction) -> Callable[..., int]:
    defaults = _defaults("classroom.report")
    parser = sub.add_parser("report", help="the class on one self-contained HTML page: totals, problems, failed "
                                           "tests, known mistakes, errors, similarity, each student's feedback")
    parser.add_argument("folders", nargs="+", type=arguments.existing_folder, metavar="OUT_DIR",
                        help="batch output folders (or folders holding them), as grader gradebook reads them")
    parser.add_argument("--html", type=arguments.output_file, required=True, help="the page to write")
    parser.add_argument("--similarity", type=arguments.existing_folder, default=defaults["similarity"], metavar="DIR",
                        help="a grader similarity output: its pairs to review, linked to its page")
    parser.add_argument("--roster", type=arguments.readable_csv, default=defaults["roster"], help="as grader gradebook's")
    parser.add_argument("--overrides", type=arguments.readable_csv, default=defaults["overrides"],
                        help="as grader gradebook's")
    parser.add_argument("--late", type=arguments.readable_csv, default=defaults["late"], metavar="FILE",
                        help="as grader gradebook's")
    return lambda a: importlib.import_module("grader.classroom.report").main(
        a.folders, out=a.html, similarity=a.similarity, roster=a.roster, overrides=a.overrides, late=a.late)


def _show(sub: argparse._SubParsersAction) -> Callable[..., int]:
    parser = sub.add_parser("show", help="print one student's feedback as the student sees it on Gradescope")
    parser.add_argument("folder", type=arguments.existing_folder, metavar="OUT_DIR", help="a batch output folder "
                                                                                        "(or a folder holding them)")
    parser.add_argument("student", help="the student id (the submission's name)")
    parser.add_argument("--overrides", type=arguments.readable_csv, help="as grader gradebook's: the student's "
                                                                         "overridden scores follow, with the reason")
    return lambda a: importlib.import_module("grader.classroom.show").main(a.folder, a.student, overrides=a.overrides)


def _gradescope_bundle(sub: argparse._SubParsersAction) -> Callable[..., int]:
    defaults = _defaults("classroom.bundle")
    bundle = importlib.import_module("grader.classroom.bundle")
    parser = sub.add_parser("gradescope-bundle", help="write a Gradescope autograder zip grading through the judge")
    parser.add_argument("out", type=arguments.zip_file, help="the .zip to write")
    parser.add_argument("--torch", default=defaults["torch"], help="what setup.sh pip-installs for torch")
    parser.add_argument("--torch-index-url", default=defaults["torch_index_url"],
                        help="package index for torch ('' for PyPI's default)")
    _grading_options(parser, bundle.SETTINGS, bundle.GRADESCOPE)
    return lambda a: bundle.main(a.out, options=a.grading_options, torch=a.torch, torch_index_url=a.torch_index_url)


def _mutate(sub: argparse._SubParsersAction) -> Callable[..., int]:
    defaults = _defaults("selfproof.mutation")
    parser = sub.add_parser("mutate", help="mutation-test the hidden suites (or the public tests) with every engine "
                            "mutant of the reference")
    parser.add_argument("--problems", type=arguments.problems, default=defaults["problems"], help="only these, e.g. P1,P3")
    parser.add_argument("--sample", type=arguments.jobs, default=defaults["sample"], help="at most N mutants per problem")
    parser.add_argument("--seed", type=arguments.seed, default=defaults["seed"], help="which sample")
    parser.add_argument("--jobs", type=arguments.jobs, default=defaults["jobs"], help="mutants graded at once (local workers)")
    parser.add_argument("--work", type=arguments.output_folder, default=defaults["work"],
                        help="sessions live here (resumable)")
    mutation = importlib.import_module("grader.selfproof.mutation")
    parser.add_argument("--suite", choices=mutation.SUITES, default=defaults["suite"],
                        help="the tests a mutant must fail: the graded hidden suites, or the public tests students run")
    return lambda a: mutation.main(
        problems=a.problems, sample=a.sample, seed=a.seed, jobs=a.jobs, work=a.work, suite=a.suite)


def _grading_options_built(args: argparse.Namespace) -> None:
    """The grading options record (``args.grading_options``), built and checked once as ``GradingOptions`` checks
    it (across options too), before any work; the command grades with it."""
    base = getattr(args, "_grading_options", None)
    if base is not None:
        try:
            args.grading_options = GradingOptions.from_args(args, base)
        except ValueError as exc:
            raise UsageError(f"grader {args.command}: {exc}") from None


def _acceptance_out(args: argparse.Namespace) -> None:
    """``selfcheck --out`` keeps the GPU acceptance's gradings: it goes with ``--gpu``."""
    if args.command == "selfcheck" and args.out is not None and not args.gpu:
        raise UsageError("grader selfcheck: --out keeps the GPU acceptance's table and gradings: use it with --gpu")


def _lms_export_named(args: argparse.Namespace) -> None:
    """``--lms`` and ``--lms-out`` come together (and never name the gradebook's own CSV)."""
    kind, out = getattr(args, "lms", None), getattr(args, "lms_out", None)
    if bool(kind) != bool(out):
        raise UsageError(f"grader {args.command}: {'--lms needs --lms-out FILE' if kind else '--lms-out needs --lms'}")
    if getattr(args, "provisional", None) and not kind:
        raise UsageError(f"grader {args.command}: --provisional says what provisional rows get in an LMS file: "
                         f"use it with --lms")
    if out is not None and out.resolve() == args.csv.resolve():
        raise UsageError(f"grader {args.command}: --lms-out {out} is the gradebook's own --csv")


def _isolation_available(args: argparse.Namespace) -> None:
    """``--isolation require-strong`` on a host that cannot give it is refused before grading."""
    if getattr(args, "isolation", "auto") != "require-strong":
        return
    from .containment.level import host

    level = host()
    if not level.strong:
        raise UsageError(f"grader {args.command}: --isolation require-strong, but this host gives {level.mechanism}; "
                         f"it lacks {'; '.join(level.lacks)}")


CHECKS: list[Callable[[argparse.Namespace], None]] = [_grading_options_built, _acceptance_out, _lms_export_named,
                                                     _isolation_available]  # across options
COMMANDS = [_grade, _stubs, _release, _selfcheck, _batch, _gradebook, _similarity, _report, _show, _gradescope_bundle,
            _mutate]


class UsageError(Exception):
    """A bad command line: reported on one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, but an error is raised (to be reported on one line) rather than printed with the usage."""

    def error(self, message: str):
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="grader", description="Instructor tooling for the resource-accounting kit",
                     allow_abbrev=False)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    handlers = {}
    for command in COMMANDS:
        before = set(sub.choices)
        handler = command(sub)
        for name in set(sub.choices) - before:
            handlers[name] = handler
            sub.choices[name].allow_abbrev = False
    parser.set_defaults(_handlers=handlers)
    return parser


def _results_file(argv: list[str]) -> Path | None:
    """``grade``'s --out, when the command line names a usable one (to hold an "Autograder failed" result)."""
    if not argv or argv[0] != "grade":
        return None
    for index, arg in enumerate(argv):
        value = arg[len("--out="):] if arg.startswith("--out=") else (
            argv[index + 1] if arg == "--out" and index + 1 < len(argv) else None)
        if value is not None:
            try:
                return arguments.output_file(value)
            except argparse.ArgumentTypeError:
                return None
    return None


def _refuse(argv: list[str], message: str) -> int:
    from .grading.results import GradingResult, write_json_atomic

    out = _results_file(argv)
    if out is not None:
        positional = [a for a in argv[1:] if not a.startswith("-")]
        write_json_atomic(out, GradingResult.failed(positional[0] if positional else "",
                                                    f"bad command line: {message}").to_gradescope_dict())
    print(" ".join(message.split()), file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = build_parser().parse_args(argv)
        for check in CHECKS:
            check(args)
    except UsageError as exc:
        return _refuse(argv, str(exc))
    try:
        return args._handlers[args.command](args)
    except KeyboardInterrupt:
        print("grader: interrupted; nothing half-written was kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
