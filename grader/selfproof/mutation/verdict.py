"""The engine's test command: does one mutated package lose points on its problem, or fail its public tests?

``python -m grader.selfproof.mutation.verdict SUBMISSION --problem P3 --expect 12`` grades SUBMISSION on
that problem's hidden suite as ``grader grade --problems P3 --profile ci`` does (the sandboxed
worker, the derandomized examples), but stops at the first failed test and never shrinks a
failing example: neither changes whether the submission loses points, and a killed mutant
costs about a third less (measured on P1's curated mutants: 8.9 s to 5.9 s). It exits 1 when it scores below ``--expect``
(the unmutated reference's score, graded the same way), 0 when it does not, and 3 when the
grader itself failed: the report counts that as an error, never as a kill. Grading in the
sandbox rather than in-process costs about a third more time per mutant here (measured on
P1-P4) and removes any doubt that a verdict differs from a real grade (the wire, timeouts and
memory cap included).

``--suite public`` asks the other question: does the mutated package fail the problem's public tests
(``pytest tests/test_p3_einsum.py --impl SUBMISSION/assignment -x``, what a student runs)? Every engine
mutant the hidden suites kill and the public tests pass is a rule the student cannot check before
submitting.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

from ...grading.grade import GradingError, grade
from ...paths import KIT_ROOT, PACKAGE
from ...problems import suite_file
from ...submission import SubmissionError
from . import SUITES

KILLED, SURVIVED, GRADER_ERROR = 1, 0, 3
MARK = "mutant verdict:"  # first words of the line the report reads back
PUBLIC_TIMEOUT_SECONDS = 600.0


def verdict(submission: str, problem: str, expect: float) -> tuple[int, str]:
    """(exit status, one-line verdict) for ``submission`` graded on ``problem``."""
    try:
        result = grade(submission, problems=[problem], profile="verdict", first_failure=True)
    except (GradingError, SubmissionError) as exc:
        return GRADER_ERROR, f"{MARK} grader error: {exc}"
    if result.score < expect:
        failed = [t.name for t in result.tests if t.status == "failed"]
        return KILLED, f"{MARK} killed, {result.score:g} / {expect:g} ({', '.join(failed)})"
    return SURVIVED, f"{MARK} survived, {result.score:g} / {expect:g}"


def public_verdict(submission: str, problem: str) -> tuple[int, str]:
    """(exit status, one-line verdict) for ``submission`` (a staged folder holding the package, or the package)
    run against ``problem``'s public tests."""
    tests = KIT_ROOT / "tests" / suite_file(problem)
    folder = Path(submission).resolve()
    package = folder / PACKAGE if (folder / PACKAGE).is_dir() else folder  # a staged submission, or a package
    command = [sys.executable, "-m", "pytest", str(tests), "--impl", str(package), "-x",
               "-q", "-p", "no:cacheprovider"]
    try:
        done = subprocess.run(command, cwd=KIT_ROOT, capture_output=True, text=True, timeout=PUBLIC_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        return KILLED, f"{MARK} killed, the public tests ran past {PUBLIC_TIMEOUT_SECONDS:g} s"
    if done.returncode == 0:
        return SURVIVED, f"{MARK} survived, the public tests passed"
    if done.returncode == 1:
        failed = re.findall(r"^FAILED (\S+)", done.stdout, re.MULTILINE)
        return KILLED, f"{MARK} killed, {', '.join(failed) or 'a public test failed'}"
    return GRADER_ERROR, f"{MARK} grader error: pytest exited {done.returncode}: {done.stdout[-300:]}{done.stderr[-300:]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.selfproof.mutation.verdict", description=__doc__.split("\n")[0])
    parser.add_argument("submission")
    parser.add_argument("--problem", required=True)
    parser.add_argument("--suite", choices=SUITES, default="hidden", help="graded (hidden) or the public tests")
    parser.add_argument("--expect", type=float, help="the unmutated reference's score (the hidden suite)")
    args = parser.parse_args(argv)
    if args.suite == "hidden" and args.expect is None:
        parser.error("--expect is required with --suite hidden")
    status, line = (verdict(args.submission, args.problem, args.expect) if args.suite == "hidden"
                    else public_verdict(args.submission, args.problem))
    print(line)
    return status


if __name__ == "__main__":
    sys.exit(main())
