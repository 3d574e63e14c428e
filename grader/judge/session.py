"""A judge session's process: ``python -m grader.judge.session PYTEST-ARGS`` runs pytest over hidden suites
(``grading.grade.judge_command``), then ends without tearing the interpreter down.

Once pytest has returned, its own report, the judge's report and the workers are done with; the interpreter's own exit
(freeing every module and object of torch, numpy, hypothesis and pytest one by one) only costs time, close
to a CPU-second, so the exit handlers run (a diagnosis's temporary folder is removed by one) and the
process ends at once with pytest's exit status.
"""

from __future__ import annotations

import atexit
import os
import sys

import pytest

from .. import deferred_dynamo
from ..containment import template


def main(argv: list[str]) -> int:
    """Run pytest with ``argv`` (``torch._dynamo`` deferred: nothing in a judge compiles; workers forked from one
    template where they can, ``template.own``); its exit status."""
    deferred_dynamo.install()
    with template.own():
        return int(pytest.main(argv))


def end(status: int) -> None:
    """Flush the output, run the exit handlers and end the process with ``status``, skipping the teardown."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    atexit._run_exitfuncs()
    os._exit(status)


if __name__ == "__main__":
    end(main(sys.argv[1:]))
