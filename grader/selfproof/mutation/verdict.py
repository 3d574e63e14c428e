"""The engine's test command: does one mutated package lose points on its problem?

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
"""

from __future__ import annotations

import argparse
import sys

from ...grading.grade import GradingError, grade
from ...submission import SubmissionError

KILLED, SURVIVED, GRADER_ERROR = 1, 0, 3
MARK = "mutant verdict:"  # first words of the line the report reads back


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.selfproof.mutation.verdict", description=__doc__.split("\n")[0])
    parser.add_argument("submission")
    parser.add_argument("--problem", required=True)
    parser.add_argument("--expect", type=float, required=True, help="the unmutated reference's score")
    args = parser.parse_args(argv)
    status, line = verdict(args.submission, args.problem, args.expect)
    print(line)
    return status


if __name__ == "__main__":
    sys.exit(main())
