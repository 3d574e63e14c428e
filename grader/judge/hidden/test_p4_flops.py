"""Hidden tests for P4 (flops.py): FLOP counts against FlopCounterMode, MFU, training time, timing.

FLOP counts are checked against ``torch.utils.flop_counter.FlopCounterMode`` on meta tensors
(nothing is computed, so sizes can be large); the scaling rules 2NP/4NP/6NP, ``mfu`` and
``training_days`` against their formulas; ``time_matmul`` and ``matmul_mfu`` against a timing
the judge takes itself, against the wall time the judge measures around each call from outside
the worker, and, on the CPU, against the CPU time the worker's whole process tree spent, read
from outside it (grader/judge/drivers/flops.py).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import warnings

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode

from grader.judge.drivers.flops import GpuWork, Rounds, gpu_work, timed_rounds
from grader.judge.handle import holding
from grader.judge.hidden._contract import answers, refused_or_as_for

H100_BF16_PEAK = 989.5e12  # dense bf16 FLOP/s (the 1979e12 of the spec sheet assumes 2:4 sparsity)
SECONDS_PER_DAY = 86_400
TIMED_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
# One failure per test, reported plainly (not an ExceptionGroup of "distinct failures"), and no
# "explain" phase: it is slow on failures and would print hidden-suite file names and lines.


# --- strategies --------------------------------------------------------------------------------

def counts(max_value: int):
    """A count as an int (whole floats are tested on their own: test_counts_may_be_whole_floats)."""
    return st.integers(0, max_value)


def bad_counts():
    """Values no count may take: negative, not whole, not finite."""
    return st.one_of(st.integers(-10**6, -1), st.sampled_from([-1.0, 0.5, 2.25, 1e3 + 0.5, math.nan, math.inf, -math.inf]))


def positive_reals():
    return st.floats(1e-6, 1e30, allow_nan=False, allow_infinity=False)


def mfus():
    return st.floats(1e-3, 1.0, allow_nan=False)


# --- oracles -----------------------------------------------------------------------------------

def counted_matmul_flops(m: int, k: int, n: int) -> int:
    a, b = torch.empty(m, k, device="meta"), torch.empty(k, n, device="meta")
    with FlopCounterMode(display=False) as counter:
        torch.mm(a, b)
    return counter.get_total_flops()


def counted_deep_linear_flops(batch: int, dim: int, num_layers: int) -> dict[str, int]:
    """FlopCounterMode on the real deep linear model: forward, then backward of a scalar loss."""
    with warnings.catch_warnings():  # dim = 0: "Initializing zero-element tensors is a no-op"
        warnings.simplefilter("ignore", UserWarning)
        layers = [torch.nn.Linear(dim, dim, bias=False) for _ in range(num_layers)]
        model = torch.nn.Sequential(*layers, torch.nn.Linear(dim, 1, bias=False)).to("meta")
    x = torch.empty(batch, dim, device="meta")  # does not require grad, as in the lecture
    with FlopCounterMode(display=False) as forward:
        loss = model(x).sum()  # a sum counts 0 FLOPs
    with FlopCounterMode(display=False) as backward:
        loss.backward()
    return {"forward": forward.get_total_flops(), "backward": backward.get_total_flops()}


def assert_int(got, want: int, call: str) -> None:
    assert type(got) is int, f"{call} returned {got!r} ({type(got).__name__}), expected the int {want}"
    assert got == want, f"{call} returned {got}, expected {want}"


def assert_close(got, want: float, call: str, rel: float = 1e-12, unit: str = "") -> None:
    """Floats computed by the same formula in a different order differ by a few ulps: rel 1e-12 is ample."""
    assert isinstance(got, numbers.Real) and not isinstance(got, bool), (
        f"{call} returned {got!r} ({type(got).__name__}), expected a float")
    assert math.isclose(got, want, rel_tol=rel), f"{call} returned {got!r}, expected {want!r}{unit}"


def gpu_peak() -> float:
    """Dense bf16 peak of the GPU runner if known, else an upper bound for any current GPU (B200: 2.25e15)."""
    name = torch.cuda.get_device_name()
    known = {"H100": H100_BF16_PEAK, "H200": H100_BF16_PEAK, "A100": 312e12}
    return next((peak for key, peak in known.items() if key in name), 2.5e15)


# --- FLOP counts -------------------------------------------------------------------------------

@pytest.mark.rule("P4.matmul-flops")
@pytest.mark.points(1.5)
@given(m=counts(2**20), k=counts(2**20), n=counts(2**20))
@example(m=16384, k=32768, n=8192)
def test_matmul_flops_matches_flop_counter(sub, m, k, n):
    """matmul_flops(m, k, n) equals what FlopCounterMode counts for (m x k) @ (k x n), as an int"""
    want = counted_matmul_flops(m, k, n)
    assert_int(sub.call("flops.matmul_flops", m, k, n), want, f"flops.matmul_flops({m!r}, {k!r}, {n!r})")


@pytest.mark.rule("P4.whole-float-counts")
@pytest.mark.points(0.5)
@given(three=st.tuples(counts(2**20), counts(2**20), counts(2**20)), layers=counts(4), big=st.booleans())
@example(three=(15 * 10**12, 70 * 10**9, 1), layers=2, big=False)  # the lecture: 15e12 tokens, 70e9 parameters
def test_counts_may_be_whole_floats(sub, three, layers, big):
    """Every counting function takes whole floats such as 70e9 as counts, and answers FLOP counts as ints (time_matmul's
    counts are graded with its timing: a corner earns nothing beside a timer that does not time)"""
    m, k, n = three
    as_floats = tuple(map(float, three))
    assert_int(sub.call("flops.matmul_flops", *as_floats), 2 * m * k * n, f"flops.matmul_flops{as_floats!r}")
    tokens, params = (m * 10**7, k * 10**5) if big else (m, k)  # up to 1e13 x 1e11: 6NP beyond a float's exact ints
    for name, factor in (("forward_flops", 2), ("backward_flops", 4), ("training_flops", 6)):
        assert_int(sub.call(f"flops.{name}", float(tokens), float(params)), factor * tokens * params,
                   f"flops.{name}({float(tokens)!r}, {float(params)!r})")
    batch, dim = m % 64, k % 64
    want = counted_deep_linear_flops(batch, dim, layers)
    got = sub.call("flops.deep_linear_flops", float(batch), float(dim), float(layers))
    call = f"flops.deep_linear_flops({float(batch)!r}, {float(dim)!r}, {float(layers)!r})"
    assert isinstance(got, dict) and {"forward", "backward"} <= set(got), (
        f"{call} returned {got!r}, expected a dict with keys 'forward' and 'backward'")
    for key in ("forward", "backward"):
        assert_int(got[key], want[key], f"{call}[{key!r}]")
    gpus = float(n % 4096 + 1)
    want_days = 6 * tokens * params / (gpus * H100_BF16_PEAK * 0.5) / SECONDS_PER_DAY
    assert_close(sub.call("flops.training_days", float(params), float(tokens), gpus, H100_BF16_PEAK, 0.5), want_days,
                 f"flops.training_days({float(params)!r}, {float(tokens)!r}, {gpus!r}, {H100_BF16_PEAK!r}, 0.5)",
                 unit=" days")


def check_scaling(sub, name: str, factor: int, tokens: int, params: int) -> None:
    assert_int(sub.call(f"flops.{name}", tokens, params), factor * tokens * params, f"flops.{name}({tokens!r}, {params!r})")


@pytest.mark.rule("P4.forward-flops")
@pytest.mark.points(0.5)
@given(tokens=counts(10**15), params=counts(10**12))
@example(tokens=15 * 10**12, params=70 * 10**9)
def test_forward_flops(sub, tokens, params):
    """forward_flops is 2NP, as an exact int"""
    check_scaling(sub, "forward_flops", 2, tokens, params)


@pytest.mark.rule("P4.backward-flops")
@pytest.mark.points(0.5)
@given(tokens=counts(10**15), params=counts(10**12))
@example(tokens=15 * 10**12, params=70 * 10**9)
def test_backward_flops(sub, tokens, params):
    """backward_flops is 4NP, as an exact int"""
    check_scaling(sub, "backward_flops", 4, tokens, params)


@pytest.mark.rule("P4.training-flops")
@pytest.mark.points(0.5)
@given(tokens=counts(10**15), params=counts(10**12))
@example(tokens=15 * 10**12, params=70 * 10**9)
def test_training_flops(sub, tokens, params):
    """training_flops is 6NP (forward plus backward), as an exact int"""
    check_scaling(sub, "training_flops", 6, tokens, params)


@pytest.mark.rule("P4.counts")
@pytest.mark.points(0.5)
@given(bad=bad_counts(), position=st.integers(0, 2), valid=st.tuples(counts(2**20), counts(2**20), counts(2**20)))
def test_bad_counts_raise_value_error(sub, bad, position, valid):
    """A negative, non-whole or infinite count raises ValueError in every counting function"""
    # Error paths count only beside working code: a valid call drawn for each example, not one to memorize.
    m, k, n = valid
    answers(sub, "flops.matmul_flops", valid, counted_matmul_flops(m, k, n))
    answers(sub, "flops.training_flops", (m, k), 6 * m * k)
    three = [4, 5, 6]
    three[position] = bad
    sub.raises(ValueError, "flops.matmul_flops", *three)
    sub.raises(ValueError, "flops.deep_linear_flops", *three)
    for name in ("forward_flops", "backward_flops", "training_flops"):
        sub.raises(ValueError, f"flops.{name}", *(three[:2] if position < 2 else [bad, 7]))
    # time_matmul's sizes and repeats and training_days' counts and GPUs too, the non-finite ones every time.
    for value in (bad, math.inf, -math.inf, math.nan):
        for spot in range(4):
            timed = [4, 4, 4, 2]
            timed[spot] = value
            sub.raises(ValueError, "flops.time_matmul", *timed[:3], torch.float32, "cpu", repeats=timed[3])
        for spot in range(3):
            counted = [70e9, 15e12, 1024]
            counted[spot] = value
            sub.raises(ValueError, "flops.training_days", *counted, H100_BF16_PEAK, 0.5)


@pytest.mark.rule("P4.time-matmul-refuses")
@pytest.mark.points(0.5)
@given(bad=bad_counts(), position=st.integers(0, 2),
       dtype=st.sampled_from([torch.int32, torch.int64, torch.bool, torch.complex64, torch.float8_e4m3fn]))
def test_time_matmul_rejects_bad_arguments(sub, bad, position, dtype):
    """time_matmul raises ValueError for a dtype it does not time, repeats below 1 (1 is allowed), or a bad count"""
    # Beside working code: a valid call answers a positive number of seconds.
    # repeats = 1 is the least allowed: one product, timed.
    for repeats in (2, 1):
        seconds = sub.call("flops.time_matmul", 4, 4, 4, torch.float32, "cpu", repeats=repeats)
        assert isinstance(seconds, numbers.Real) and not isinstance(seconds, bool) and seconds > 0, (
            f"flops.time_matmul(4, 4, 4, torch.float32, 'cpu', repeats={repeats}) returned {seconds!r}, "
            "expected positive seconds")
    sub.raises(ValueError, "flops.time_matmul", 4, 4, 4, dtype, "cpu", repeats=2)
    sub.raises(ValueError, "flops.time_matmul", 4, 4, 4, torch.float32, "cpu", repeats=bad)
    sub.raises(ValueError, "flops.time_matmul", 4, 4, 4, torch.float32, "cpu", repeats=0)
    three = [4, 4, 4]
    three[position] = bad
    sub.raises(ValueError, "flops.time_matmul", *three, torch.float32, "cpu", repeats=2)


def check_deep_linear_flops(sub, batch, dim, num_layers) -> None:
    want = counted_deep_linear_flops(batch, dim, num_layers)
    call = f"flops.deep_linear_flops({batch!r}, {dim!r}, {num_layers!r})"
    got = sub.call("flops.deep_linear_flops", batch, dim, num_layers)
    assert isinstance(got, dict) and {"forward", "backward"} <= set(got), (
        f"{call} returned {got!r}, expected a dict with keys 'forward' and 'backward'")
    assert_int(got["forward"], want["forward"], f"{call}['forward']")
    assert_int(got["backward"], want["backward"], f"{call}['backward'] (the first layer's input gradient is never computed)")


@pytest.mark.rule("P4.deep-linear-flops")
@pytest.mark.points(1.5)
@given(batch=counts(64), dim=counts(64), num_layers=st.integers(1, 4))
@example(batch=4, dim=8, num_layers=2)
def test_deep_linear_flops_matches_flop_counter(sub, batch, dim, num_layers):
    """deep_linear_flops equals FlopCounterMode's forward and backward counts on the real model"""
    # Core: one hidden layer or more. The no-hidden-layer corner is test_deep_linear_flops_without_hidden_layers.
    check_deep_linear_flops(sub, batch, dim, num_layers)


@pytest.mark.rule("P4.deep-linear-no-hidden-layers")
@pytest.mark.points(0.5)
@given(batch=counts(64), dim=counts(64))
@example(batch=4, dim=8)
def test_deep_linear_flops_without_hidden_layers(sub, batch, dim):
    """deep_linear_flops with num_layers = 0 counts the head as the first layer (backward: its weight gradient only)"""
    # Corner: num_layers = 0 only; the core is test_deep_linear_flops_matches_flop_counter.
    check_deep_linear_flops(sub, batch, dim, 0)


# --- MFU and training time ---------------------------------------------------------------------

@pytest.mark.rule("P4.mfu")
@pytest.mark.points(0.5)
@given(flops=st.floats(1.0, 1e30), seconds=positive_reals(), peak=positive_reals())
@example(flops=1e12, seconds=2.0, peak=1e12)
@example(flops=0.0, seconds=1.0, peak=1e12)
@example(flops=3e12, seconds=1.0, peak=1e12)
def test_mfu(sub, flops, seconds, peak):
    """mfu is flops / seconds / peak, not clipped to 1"""
    call = f"flops.mfu({flops!r}, {seconds!r}, {peak!r})"
    assert_close(sub.call("flops.mfu", flops, seconds, peak), flops / seconds / peak, call)


@pytest.mark.rule("P4.mfu-refuses")
@pytest.mark.points(0.5)
@given(flops=st.floats(0.0, 1e30), seconds=positive_reals(), peak=positive_reals(),
       not_finite=st.sampled_from([math.inf, -math.inf, math.nan]))
def test_mfu_rejects_bad_arguments(sub, flops, seconds, peak, not_finite):
    """mfu raises ValueError for negative or non-finite flops, and seconds or a peak not finite and > 0"""
    # Beside working code: the valid call is drawn for each example, not one to memorize.
    answers(sub, "flops.mfu", (flops, seconds, peak), flops / seconds / peak)
    sub.raises(ValueError, "flops.mfu", flops, 0.0, peak)
    sub.raises(ValueError, "flops.mfu", flops, -seconds, peak)
    sub.raises(ValueError, "flops.mfu", flops, seconds, 0.0)
    sub.raises(ValueError, "flops.mfu", flops, seconds, -peak)
    sub.raises(ValueError, "flops.mfu", -1.0 - flops, seconds, peak)
    sub.raises(ValueError, "flops.mfu", not_finite, seconds, peak)
    sub.raises(ValueError, "flops.mfu", flops, not_finite, peak)
    sub.raises(ValueError, "flops.mfu", flops, seconds, not_finite)


@pytest.mark.rule("P4.training-days")
@pytest.mark.points(1.5)
@given(params=counts(10**12), tokens=counts(10**14), gpus=st.integers(1, 4096), peak=positive_reals(), mfu=mfus())
@example(params=70e9, tokens=15e12, gpus=1024, peak=H100_BF16_PEAK, mfu=0.5)
@example(params=10**9, tokens=10**9, gpus=1, peak=6e18 / SECONDS_PER_DAY, mfu=1.0)
def test_training_days(sub, params, tokens, gpus, peak, mfu):
    """training_days is 6NP / (gpus * peak * mfu) in days (the lecture: ~143.9 days for 70B on 15T tokens)"""
    call = f"flops.training_days({params!r}, {tokens!r}, {gpus!r}, {peak!r}, {mfu!r})"
    want = 6 * int(params) * int(tokens) / (gpus * peak * mfu) / SECONDS_PER_DAY
    assert_close(sub.call("flops.training_days", params, tokens, gpus, peak, mfu), want, call, unit=" days")


@pytest.mark.rule("P4.training-days-refuses")
@pytest.mark.points(0.5)
@given(bad=st.one_of(st.sampled_from([0.0, -0.0, -0.5, 1.0 + 2**-52, 1.5, 2.0, math.nan, math.inf]),
                     st.floats(1.0, 100.0, exclude_min=True), st.floats(-100.0, 0.0)),
       params=counts(10**12), tokens=counts(10**14), gpus=st.integers(1, 4096), peak=positive_reals(),
       bad_count=bad_counts())
def test_training_days_rejects_mfu_outside_zero_one(sub, bad, params, tokens, gpus, peak, bad_count):
    """training_days raises ValueError for an mfu outside (0, 1], GPUs below 1 or not whole, a peak not finite and > 0, or a bad count; mfu = 1 is allowed"""
    sub.raises(ValueError, "flops.training_days", 70e9, 15e12, 1024, H100_BF16_PEAK, bad)
    sub.raises(ValueError, "flops.training_days", 70e9, 15e12, 0, H100_BF16_PEAK, 0.5)
    sub.raises(ValueError, "flops.training_days", 70e9, 15e12, -gpus, H100_BF16_PEAK, 0.5)
    sub.raises(ValueError, "flops.training_days", 70e9, 15e12, gpus + 0.5, H100_BF16_PEAK, 0.5)
    sub.raises(ValueError, "flops.training_days", bad_count, 15e12, 1024, H100_BF16_PEAK, 0.5)
    sub.raises(ValueError, "flops.training_days", 70e9, bad_count, 1024, H100_BF16_PEAK, 0.5)
    for bad_peak in (0.0, -H100_BF16_PEAK, math.inf, math.nan):
        sub.raises(ValueError, "flops.training_days", 70e9, 15e12, 1024, bad_peak, 0.5)
    # Beside working code: the valid calls are drawn for each example, not ones to memorize.
    drawn = (params, tokens, gpus)
    # A str where a number is asked: ValueError, TypeError, or the answer for that number.
    refused_or_as_for(sub, "flops.training_days", (*drawn, peak, "0.5"), (*drawn, peak, 0.5))
    refused_or_as_for(sub, "flops.training_days", (*drawn, repr(peak), 0.5), (*drawn, peak, 0.5))
    want = 6 * int(params) * int(tokens) / (gpus * peak) / SECONDS_PER_DAY
    assert_close(sub.call("flops.training_days", *drawn, peak, 1.0), want,
                 f"flops.training_days({params!r}, {tokens!r}, {gpus!r}, {peak!r}, 1.0)", unit=" days (mfu = 1 is allowed)")


# --- timing ------------------------------------------------------------------------------------
# CPU timings on a shared grading machine are noisy, so the judge times the same product in its
# own process, on one thread (the worker's calls run on one thread too), interleaved with the
# student's calls, and both sides keep their fastest of five rounds: a correct timer lands within
# a few tens of percent of the judge's. The
# band is a factor of 8 either way: wide for a noisy runner, yet narrow enough to catch a total
# instead of a mean (repeats = 32 times too large) or a timer that skips the product.

CPU_SIZE, CPU_REPEATS, CPU_BAND = 512, 32, 8.0
# A timer must also have spent the CPU time of the products it reports, measured from outside for
# the worker's whole process tree (its cgroup's cpuacct, else /proc: exited children included): over
# a test's calls, at least CPU_SHARE of (repeats x each product's time), a product's time taken as
# the lesser of the time reported and the judge's own CPU time for one product in the same round (a
# busy machine stretches wall-clock times, not the CPU time a product needs). An honest timer spends
# its warm-up products and the call's own handling on top (about 2x what is asked, measured); a half
# covers the judge and the worker running on differently loaded cores of a shared 2-core runner. A
# timer that runs one product and sleeps through the others spends about 1/repeats of it, plus the
# call's handling (a few ms of CPU time: 512 makes a product outweigh it, 256 did not).
CPU_SHARE = 0.5


def judge_seconds(found: Rounds, on_cpu: bool) -> list[float]:
    """The judge's times per product that a timing may agree with: its fastest round's and, on the CPU, the CPU
    time its thread spent per product, which a busy machine does not stretch (seen: beside four busy loops and
    two gradings on 2 cores, the judge's fastest round took 8.7 times the worker's fastest answer)."""
    return [min(found.reference), min(found.reference_cpu)] if on_cpu else [min(found.reference)]


def assert_timing(found: Rounds, call: str, band: float, repeats: float, why: str = "", on_cpu: bool = True) -> None:
    """The submission's timings agree with the judge's, and with the wall time around its calls."""
    got = found.student
    assert all(isinstance(t, numbers.Real) and not isinstance(t, bool) and t > 0 for t in got), (
        f"{call} returned {got!r}, expected positive numbers of seconds")
    best, references = min(found.free()), judge_seconds(found, on_cpu)
    assert any(reference / band <= best <= reference * band for reference in references), (
        f"{call} returned {best:.3g} s (its fastest of {len(got)} calls), but the judge's own timing of the same "
        f"product gives {references[0]:.3g} s per product (within a factor {band:g} is accepted){why}")
    assert_ran_for_real(found, call, repeats)


def assert_ran_for_real(found: Rounds, call: str, repeats: float) -> None:
    """Measured from outside: a call that times ``repeats`` products took at least that long."""
    for seconds, wall in zip(found.student, found.wall):
        assert seconds * repeats <= wall * 1.05 + 1e-3, (
            f"{call} returned {seconds:.3g} s per product for {repeats:g} products, but the whole call took "
            f"{wall:.3g} s as the judge measured it: it cannot have timed what it reports")


def assert_spent_cpu(calls: list[tuple[Rounds, float]], call: str) -> None:
    """Measured from outside: the worker's tree spent the CPU time of the products it reported
    (``calls``: each test's rounds with the products per call), within CPU_SHARE."""
    needed = CPU_SHARE * sum(repeats * min(seconds, cpu) for found, repeats in calls
                             for seconds, cpu in zip(found.student, found.reference_cpu))
    spent = sum(found.cpu for found, _ in calls)
    products = sum(repeats * len(found.student) for found, repeats in calls)
    assert spent >= needed, (
        f"{call}: your process (and any it started) spent {spent:.3g} s of CPU time over {products:g} reported "
        f"products, as the judge measured it from outside, but one product takes about "
        f"{min(min(found.reference_cpu) for found, _ in calls):.3g} s of CPU time: at least {needed:.3g} s was "
        "expected (it cannot have run the products it timed: a timer that waits or predicts instead fails)")


# A timing must also follow what the submission cannot foresee: in PAUSED extra rounds, placed at random,
# the judge stops and continues the worker's whole tree over and over while the call runs
# (Submission.paused_call, on the schedule of grader/judge/drivers/flops.py), so that it can run only a
# share r of the call's wall time (about a twelfth; measured per call), and gets a share c of a core
# while ready to run, whatever else loads the machine. A product then takes about its CPU time (the
# judge's) / (r c) of wall time, which an honest timer reports (seen: 1.0-1.9 times it, idle and beside
# four busy loops; a timer of one product, which a stop more or less stretches by a third, 0.43-1.2 in
# its better paused round), hence PAUSED_SHARE. The judge measures r, and c from outside (the CPU time
# the worker's tree spent in the call and how long its threads waited for a CPU: ``Call.stretch``). A
# forecast made before the call (one small product timed, scaled up, then waited or spun out) reports
# what an unpaused call would: about r times that whatever the load (seen: 0.06-0.23), and not STRETCH
# times the fastest unpaused answer (an honest timer's paused answers were 3.5-31 times that). Only calls
# that time many products are paused: a couple of products fit in a few of the worker's running windows,
# and their time would be luck.
# Every call is held to its own measurement, not the best of them: each paused answer to its own
# pause, and each unpaused one (where the kernel says how long the worker waited for a CPU) to at most
# STEADY times the time a product took in it. An answer that does not follow the products (a fixed
# schedule: the forecast in some calls, many times it in others) must then place its large answers
# exactly on the paused rounds: PAUSED_SHARE / RUNNING_SHARE (4.4) over STEADY leaves no answer right
# for both kinds of round, and a schedule guesses the paused places among ROUNDS + PAUSED calls once in
# C(8, 3) = 56.
ROUNDS, PAUSED, PAUSED_SHARE, STRETCH, STEADY = 5, 3, 0.35, 2.0, 3.0


def assert_follows_pauses(found: Rounds, call: str) -> None:
    """Measured from outside: every call the judge paused at random reports at least PAUSED_SHARE of
    the time a product took there (a product's CPU time x ``Call.stretch``) and STRETCH times the
    fastest answer of the calls it left alone; each of those reports at most STEADY times the time a
    product took in it."""
    cpu = min(found.reference_cpu)
    for row in found.paused():
        took = cpu * row.stretch()
        assert row.answer >= PAUSED_SHARE * took, (
            f"{call} returned {row.answer:.3g} s per product from a call in which the judge kept your process "
            f"stopped {row.stopped:.0%} of the time (and it spent {row.spent:.3g} s of CPU time in {row.wall:.3g} s, "
            f"as the judge measured it from outside), but one product needs about {cpu:.3g} s of CPU time, so it "
            f"took about {took:.3g} s there (at least {PAUSED_SHARE * took:.3g} s was expected): a timing of the "
            "products follows the time they took, a forecast does not (time the products themselves with "
            "time.perf_counter)")
    paused, free = min(row.answer for row in found.paused()), min(found.free())
    assert paused >= STRETCH * free, (
        f"{call} returned {paused:.3g} s per product from a call in which the judge kept your process stopped "
        f"most of the time, and {free:.3g} s from a call it left alone: a timing of the products is at least "
        f"{STRETCH:g} times longer when they took longer, a forecast is not (time the products themselves "
        "with time.perf_counter)")
    for row in found.calls():
        took = cpu * row.stretch()
        assert row.stopped or row.waited is None or row.answer <= STEADY * took, (
            f"{call} returned {row.answer:.3g} s per product from a call the judge left alone, in which it spent "
            f"{row.spent:.3g} s of CPU time in {row.wall:.3g} s, as the judge measured it from outside: one product "
            f"took about {took:.3g} s there (at most {STEADY * took:.3g} s was expected): a timing of the products "
            "follows the time they took, an answer that does not is not a timing (time the products themselves "
            "with time.perf_counter)")


# The judge's own timing of a product, in each round, is the mean of at most JUDGE_REPEATS products (as
# matmul_mfu's is): the checks use a test's fastest round, which more products hardly steadied (over 7
# rounds of one thread, 512^3 products varied by 1.8% of their time with 10 per round, 1.4% with 64), while
# 64 a round cost the mean-of-one-product test about a CPU-second more.
JUDGE_REPEATS = 10


def cpu_timings(sub, repeats: int | float) -> Rounds:
    n = CPU_SIZE
    return timed_rounds(sub, "flops.time_matmul", (n, n, n, torch.float32, "cpu"), min(int(repeats), JUDGE_REPEATS),
                        ROUNDS, paused=PAUSED if repeats >= CPU_REPEATS else 0, repeats=repeats)


@pytest.mark.rule("P4.time-matmul")
@pytest.mark.points(1)
def test_time_matmul_on_cpu_agrees_with_an_independent_timing(sub):
    """time_matmul on the CPU agrees with an independent timing of the same product"""
    # Expected: the judge's own timing (grader/judge/drivers/flops.py), interleaved with the calls;
    # measured from outside: the wall time of each call, which must cover the products reported.
    # Also measured from outside: the CPU time the worker's whole tree spent (assert_spent_cpu).
    n = CPU_SIZE
    call = f"flops.time_matmul({n}, {n}, {n}, torch.float32, 'cpu', repeats={CPU_REPEATS})"
    found = cpu_timings(sub, CPU_REPEATS)
    assert_timing(found, call, CPU_BAND, CPU_REPEATS)
    assert_spent_cpu([(found, CPU_REPEATS)], call)
    assert_follows_pauses(found, call)


@pytest.mark.rule("P4.time-matmul", "P4.time-matmul-inputs")
@pytest.mark.points(1)
def test_time_matmul_is_the_mean_of_one_product(sub):
    """time_matmul returns the time of one product (the mean) of inputs drawn once, whatever repeats is, in every listed dtype"""
    n, few, many = CPU_SIZE, 2, 64.0
    # Every listed dtype, the device as a str or a torch.device: small products, positive seconds.
    for dtype in TIMED_DTYPES:
        for device in ("cpu", torch.device("cpu")):
            seconds = sub.call("flops.time_matmul", 16, 16, 16, dtype, device, repeats=2)
            assert isinstance(seconds, numbers.Real) and not isinstance(seconds, bool) and seconds > 0, (
                f"flops.time_matmul(16, 16, 16, {dtype}, {device!r}, repeats=2) returned {seconds!r}, expected positive "
                "seconds (dtype float16, bfloat16, float32 or float64; device a str or a torch.device)")
    # The inputs drawn once: after calls with different repeats, torch's generator is at the same point.
    next_draws = {}
    for repeats in (1, 9):
        sub.lib("torch.manual_seed", 0).release()
        sub.call("flops.time_matmul", 16, 16, 16, torch.float32, "cpu", repeats=repeats)
        with holding(sub.lib("torch.rand", 4)) as draws:
            next_draws[repeats] = draws.read()
    assert torch.equal(next_draws[1], next_draws[9]), (
        "torch.manual_seed(0); flops.time_matmul(16, 16, 16, torch.float32, 'cpu', repeats=1), then the same with "
        "repeats=9, left torch's generator at different points: the call with more repeats drew more random numbers; "
        "expected the inputs drawn once, before the clock starts, and the timed products to reuse them, as rule "
        "[P4.time-matmul-inputs] says")
    rounds = {repeats: cpu_timings(sub, repeats) for repeats in (few, many)}
    for repeats, found in rounds.items():
        assert_ran_for_real(found, f"flops.time_matmul({n}, {n}, {n}, torch.float32, 'cpu', repeats={repeats!r})",
                            repeats)
    assert_spent_cpu([(found, repeats) for repeats, found in rounds.items()],
                     f"flops.time_matmul({n}, {n}, {n}, torch.float32, 'cpu', repeats={few} and {many!r})")
    assert_follows_pauses(rounds[many], f"flops.time_matmul({n}, {n}, {n}, torch.float32, 'cpu', repeats={many!r})")
    timed = {repeats: min(found.free()) for repeats, found in rounds.items()}
    # The mean of 64 products and of 2 products differ only by noise; a total would be 32x larger.
    assert timed[many] < 6 * timed[few], (
        f"flops.time_matmul({n}, {n}, {n}, torch.float32, 'cpu', repeats={many!r}) returned {timed[many]:.3g} s, "
        f"but {timed[few]:.3g} s with repeats={few}: expected about the same, the mean time of ONE product")


def check_mfu(found: Rounds, call: str, n: int, peak: float, band: float, at_most_one: bool = False,
              on_cpu: bool = True) -> None:
    """MFU values agree with 2n^3 / (the judge's seconds) / peak, and the calls took real time."""
    got = found.student
    assert all(isinstance(v, numbers.Real) and not isinstance(v, bool) and v > 0 and (v <= 1 or not at_most_one)
               for v in got), (f"{call} returned {got!r}, expected positive numbers"
                               + (" in (0, 1]: an MFU above 1 means an unsynchronized timing" if at_most_one else ""))
    references = [2 * n**3 / seconds / peak for seconds in judge_seconds(found, on_cpu)]
    assert any(reference / band <= max(got) <= reference * band for reference in references), (
        f"{call} returned {max(got):.3g} (its best of {len(got)} calls), but the judge's own timing gives an MFU of "
        f"{references[0]:.3g} (within a factor {band:g} is accepted)")
    assert_ran_for_real(implied_seconds(found, n, peak), call, 1)


def implied_seconds(found: Rounds, n: int, peak: float) -> Rounds:
    """``found`` with each MFU answer replaced by the time per product it implies."""
    return dataclasses.replace(found, student=[2 * n**3 / value / peak for value in found.student])


@pytest.mark.rule("P4.matmul-mfu")
@pytest.mark.points(0.5)
def test_matmul_mfu_on_cpu_agrees_with_an_independent_timing(sub):
    """matmul_mfu on the CPU agrees with 2mkn / (independently measured seconds) / peak"""
    n, peak = CPU_SIZE, 1e12
    found = timed_rounds(sub, "flops.matmul_mfu", (n, n, n, torch.float32, "cpu", peak), JUDGE_REPEATS, ROUNDS, paused=PAUSED)
    call = f"flops.matmul_mfu({n}, {n}, {n}, torch.float32, 'cpu', {peak:g})"
    check_mfu(found, call, n, peak, CPU_BAND)
    assert_spent_cpu([(implied_seconds(found, n, peak), 1)], call)
    assert_follows_pauses(implied_seconds(found, n, peak), call)


# On a GPU a synchronized timer agrees with CUDA events to a few percent; an unsynchronized one
# times only the kernel launches, 20-30x too fast for a 4096^3 bf16 product on an H100.
GPU_SIZE, GPU_BAND = 4096, 3.0
# Seen on an H200: back-to-back 8192^3 bf16 products drew about 570 W above a board with two CUDA
# contexts idle, a process that ran one product and slept next to none; half separates them widely.
GPU_SHARE = 0.5


@pytest.mark.rule("P4.time-matmul-sync")
@pytest.mark.gpu
@pytest.mark.points(1)
def test_time_matmul_on_gpu_agrees_with_cuda_events(sub):
    """time_matmul on CUDA agrees with a CUDA-event timing (it must synchronize)"""
    # Expected: CUDA events recorded by the judge process around its own products on the same GPU.
    n = GPU_SIZE
    # Measured from outside: the energy the GPU board drew above idle during one longer call, against
    # the judge's own products (NVML; its utilization where the board has no energy counter).
    found = timed_rounds(sub, "flops.time_matmul", (n, n, n, torch.bfloat16, "cuda"), 10, repeats=10, timeout=120)
    assert_timing(found, f"flops.time_matmul({n}, {n}, {n}, torch.bfloat16, 'cuda')", GPU_BAND, 10,
                  why=" (far too fast: the clock stopped before the GPU finished, call torch.cuda.synchronize())",
                  on_cpu=False)
    assert_did_gpu_work(gpu_work(sub, n, torch.bfloat16, min(found.reference)),
                        f"flops.time_matmul({n}, {n}, {n}, torch.bfloat16, 'cuda'")


def assert_did_gpu_work(work: GpuWork, call: str) -> None:
    """The GPU did at least GPU_SHARE of the work of the judge's products while the timer ran."""
    assert work.judge is not None and work.student is not None, (
        f"{call}): the grader could not read the GPU from outside ({work.why}): a problem of the grading machine, "
        "not of your code; tell your instructor")
    if work.judge.joules is not None and work.student.joules is not None:
        spent, expected, unit = work.student.joules, work.judge.joules, "J above idle"
    else:
        spent, expected, unit = work.student.utilization, work.judge.utilization, "% mean utilization"
    assert spent >= GPU_SHARE * expected, (
        f"{call}, repeats={work.repeats}): the GPU drew {spent:.3g} {unit} while your timer ran, as the NVIDIA driver "
        f"reports from outside your process, but {work.repeats} such products drew {expected:.3g} {unit} in the judge: "
        "a timer must run every product it times (one product timed and the rest waited out is not a timing)")


@pytest.mark.rule("P4.matmul-mfu")
@pytest.mark.gpu
@pytest.mark.points(1)
def test_matmul_mfu_on_gpu_is_between_zero_and_one(sub):
    """matmul_mfu on CUDA lies in (0, 1] and agrees with a CUDA-event timing"""
    n, peak = GPU_SIZE, gpu_peak()
    found = timed_rounds(sub, "flops.matmul_mfu", (n, n, n, torch.bfloat16, "cuda", peak), 10, timeout=120)
    check_mfu(found, f"flops.matmul_mfu({n}, {n}, {n}, torch.bfloat16, 'cuda', {peak:g})", n, peak, GPU_BAND,
              at_most_one=True, on_cpu=False)
