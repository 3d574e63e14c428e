"""Every rule the handout states is checked by a public test that names it.

Each case is the reference with one small edit breaking one rule the handout states (an example,
a boundary, an error): the public tests of that function must fail, and the failure must say the
rule in the words given here, so that a student learns it from the public run and not from the
hidden grade.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from grader.submission import stage

KIT = Path(__file__).resolve().parents[3]


class Variant(NamedTuple):
    module: str
    find: str
    replace: str
    selection: str  # the -k expression that runs the public tests of the function
    said: str  # words the failure must show


VARIANTS = {
    "underflow-strictly-below-half": Variant(
        "memory", "return abs(as_float32) <= half_smallest_subnormal", "return abs(as_float32) < half_smallest_subnormal",
        "underflows_to_zero", "(<=, not <)"),
    "fnuz-biases-of-the-ieee-rule": Variant(
        "memory", "torch.float8_e4m3fnuz: (4, 3, 8),\n    torch.float8_e5m2fnuz: (5, 2, 16),",
        "torch.float8_e4m3fnuz: (4, 3, 7),\n    torch.float8_e5m2fnuz: (5, 2, 15),",
        "underflows_to_zero", "bias 8, one more than the IEEE rule"),
    "optimizer-state-in-the-parameter-dtype": Variant(
        "memory", '"optimizer_state": states * num_params * _STATE_BYTES,', '"optimizer_state": states * num_params * size,',
        "deep_linear_memory", "optimizer state stays float32"),
    "max-params-divided-as-floats": Variant(
        "memory", "return gpus * per_gpu // per_param", "return int(gpus * per_gpu / per_param)",
        "max_trainable_params", "do the division on ints (//)"),
    "size-one-dim-breaks-a-run": Variant(
        "strides", "(shape[tensor_d - 1] != 1\n                             and strides[tensor_d - 1]",
        "(strides[tensor_d - 1]", "view_strides", "a size-1 dim is never stepped along"),
    "negative-step-accepted": Variant(
        "strides", "or step < 1:", "or step == 0:", "slice_view", "a negative step is refused too"),
    "no-gpus-divides-by-zero": Variant(
        "flops", '    if gpus == 0:\n        raise ValueError("num_gpus must be at least 1")\n', "",
        "training_days", "num_gpus below 1 is refused with ValueError"),
    "permute-by-a-built-name": Variant(
        "einsum", 'return rearrange(images, "b h w c -> b c h w")',
        'return getattr(rearrange(images, "b h w c -> b h w c"), "per" + "mute")(0, 3, 1, 2)',
        "form", "calls getattr(..., 'permute')"),
    "float-heads-handed-to-einops": Variant(
        "einsum", 'return rearrange(x, "... (heads d) -> ... heads d", heads=heads)',
        'return rearrange(x, "... (heads d) -> ... heads d", heads=num_heads)',
        "split_heads", "FAILED tests/test_p3_einsum.py::test_split_heads_takes_a_whole_float_count"),
}


def variant_of_the_reference(variant: Variant, dest: Path) -> Path:
    package = stage(KIT / "solutions", dest)
    module = package / f"{variant.module}.py"
    source = module.read_text(encoding="utf-8")
    assert source.count(variant.find) == 1, f"{variant.find!r} is not once in solutions/{variant.module}.py"
    module.write_text(source.replace(variant.find, variant.replace), encoding="utf-8")
    return package


@pytest.mark.parametrize("name", VARIANTS)
def test_a_broken_rule_fails_a_public_test_that_states_it(name, tmp_path):
    variant = VARIANTS[name]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([sys.executable, "-m", "pytest", "tests", "-k", variant.selection, "-q",
                          "--impl", str(variant_of_the_reference(variant, tmp_path))],
                         cwd=KIT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 1, run.stdout[-3000:]
    assert variant.said in run.stdout, run.stdout[-3000:]


def test_a_crash_is_reported_by_its_own_tests_not_by_the_form_tests(tmp_path):
    crash = Variant("einsum", 'return einsum(x, w, "... d_in, d_out d_in -> ... d_out")',
                    'return einsum(x, w, "... d_in, d_in d_out -> ... d_out")', "", "")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([sys.executable, "-m", "pytest", "tests/test_p3_einsum.py", "-q", "-rfs",
                          "--impl", str(variant_of_the_reference(crash, tmp_path))],
                         cwd=KIT, env=env, capture_output=True, text=True, timeout=600)
    failed = [line for line in run.stdout.splitlines() if line.startswith("FAILED")]
    assert failed and all("linear" in line for line in failed), failed
    skipped = [line for line in run.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(skipped) == 1 and skipped[0].startswith("SKIPPED [2]"), skipped  # the two form tests
    assert "form is checked once every function runs; einsum.linear(" in skipped[0], skipped
