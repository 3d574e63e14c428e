"""Public tests for P4 (flops.py): FLOP formulas against PyTorch's FLOP counter, MFU, timing."""

from __future__ import annotations

import functools
import math
import time
from typing import Callable

import pytest
import torch
from _kit import call, check_close, check_equal, check_raises, check_true
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode

H100_BF16_PEAK = 989.5e12  # dense bf16; the 1979e12 on the spec sheet assumes 2:4 sparsity


def counted_matmul_flops(m: int, k: int, n: int) -> int:
    """PyTorch's count for one (m x k) @ (k x n) product (on the meta device: nothing is computed)."""
    a, b = torch.empty(m, k, device="meta"), torch.empty(k, n, device="meta")
    with FlopCounterMode(display=False) as counter:
        a @ b
    return counter.get_total_flops()


def counted_deep_linear_flops(batch: int, dim: int, num_layers: int) -> dict[str, int]:
    """PyTorch's count for one step of the deep linear model (meta device)."""
    layers = [torch.nn.Linear(dim, dim, bias=False) for _ in range(num_layers)] + [torch.nn.Linear(dim, 1, bias=False)]
    model = torch.nn.Sequential(*layers).to("meta")
    x = torch.empty(batch, dim, device="meta")
    with FlopCounterMode(display=False) as forward:
        loss = model(x).sum()
    with FlopCounterMode(display=False) as backward:
        loss.backward()
    return {"forward": forward.get_total_flops(), "backward": backward.get_total_flops()}


def reference_seconds(m: int, k: int, n: int, dtype: torch.dtype, device: str, repeats: int) -> float:
    """An independent mean time of one product (warm-up, then synchronized timing)."""
    a = torch.randn(m, k, dtype=dtype, device=device)
    b = torch.randn(k, n, dtype=dtype, device=device)
    for _ in range(3):
        torch.matmul(a, b)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        torch.matmul(a, b)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / repeats


# --- FLOP formulas ---------------------------------------------------------------------------

@pytest.mark.rule("P4.matmul-flops")
def test_matmul_flops_lecture_example(flops):
    B, D, K = 16384, 32768, 8192
    check_equal(flops.matmul_flops, B, D, K, expected=2 * B * D * K,
                why="every one of the B*K outputs needs D multiplies and D adds")


@pytest.mark.rule("P4.matmul-flops")
@settings(max_examples=30, deadline=None)
@given(m=st.integers(0, 64), k=st.integers(0, 64), n=st.integers(0, 64))
def test_matmul_flops_matches_flop_counter(flops, m, k, n):
    call(flops.matmul_flops, m, k, n)  # a stub fails here, before the FLOP counter's first use (seconds of imports)
    check_equal(flops.matmul_flops, m, k, n, expected=counted_matmul_flops(m, k, n))


@pytest.mark.rule("P4.whole-float-counts")
def test_counts_may_be_whole_floats(flops):
    why = "whole-float counts are counts: FLOP counts are returned as ints"
    check_equal(flops.matmul_flops, 2.0, 3.0, 4.0, expected=48, why=why)
    for name, factor in (("forward_flops", 2), ("backward_flops", 4), ("training_flops", 6)):
        check_equal(getattr(flops, name), 15e12, 70e9, expected=factor * 15 * 10**12 * 70 * 10**9, why=why)
    check_equal(flops.deep_linear_flops, 4.0, 8.0, 2.0, expected={"forward": 1088, "backward": 1664}, why=why)
    check_close(flops.training_days, 70e9, 15e12, 1024.0, H100_BF16_PEAK, 0.5,
                expected=6 * 70e9 * 15e12 / (1024 * H100_BF16_PEAK * 0.5) / 86400, rtol=1e-9, why="1024.0 GPUs are 1024")
    seconds = call(flops.time_matmul, 8.0, 8.0, 8.0, torch.float32, "cpu", repeats=2.0)
    check_true(isinstance(seconds, float) and seconds > 0, "flops.time_matmul(8.0, 8.0, 8.0, torch.float32, 'cpu', "
               "repeats=2.0)", seconds, "a positive number of seconds", "flops.time_matmul", "8.0 is the count 8")


BAD_COUNTS = [-1, 2.5, -0.5, math.nan, math.inf]


@pytest.mark.rule("P4.counts")
@pytest.mark.parametrize("bad", BAD_COUNTS, ids=repr)
@pytest.mark.parametrize("position", [0, 1, 2])
def test_matmul_and_deep_linear_flops_reject_bad_counts(flops, bad, position):
    args = [4, 8, 2]
    args[position] = bad
    check_raises(ValueError, flops.matmul_flops, *args, why="a count is a non-negative whole number")
    check_raises(ValueError, flops.deep_linear_flops, *args, why="a count is a non-negative whole number")


@pytest.mark.rule("P4.counts")
@pytest.mark.parametrize("bad", BAD_COUNTS, ids=repr)
@pytest.mark.parametrize("name", ["forward_flops", "backward_flops", "training_flops"])
def test_token_and_param_counts_are_validated(flops, name, bad):
    check_raises(ValueError, getattr(flops, name), bad, 10, why="a count is a non-negative whole number")
    check_raises(ValueError, getattr(flops, name), 5, bad, why="a count is a non-negative whole number")


TOKENS, PARAMS = 15 * 10**12, 70 * 10**9  # the lecture's: 2NP = 2.1e24, more than a float holds exactly


@pytest.mark.rule("P4.forward-flops")
def test_forward_flops_lecture_example(flops):
    check_equal(flops.forward_flops, TOKENS, PARAMS, expected=2 * TOKENS * PARAMS, why="2NP, exactly")


@pytest.mark.rule("P4.backward-flops")
def test_backward_flops_lecture_example(flops):
    check_equal(flops.backward_flops, TOKENS, PARAMS, expected=4 * TOKENS * PARAMS,
                why="4NP: an input gradient and a weight gradient per weight, exactly")


@pytest.mark.rule("P4.training-flops")
def test_training_flops_lecture_example(flops):
    check_equal(flops.training_flops, TOKENS, PARAMS, expected=6 * TOKENS * PARAMS,
                why="training = forward (2NP) + backward (4NP), exactly")


@pytest.mark.rule("P4.deep-linear-flops")
def test_deep_linear_flops_example(flops):
    # B=4, D=8, 2 layers: P = 2*64 + 8 = 136; forward 2*4*136; backward 4*4*136 - 2*4*64.
    check_equal(flops.deep_linear_flops, 4, 8, 2, expected={"forward": 1088, "backward": 1664},
                why="the first layer's input gradient is never computed")


@pytest.mark.rule("P4.deep-linear-no-hidden-layers")
@pytest.mark.parametrize("batch, dim", [(4, 8), (1, 1), (3, 5)])
def test_deep_linear_flops_without_hidden_layers(flops, batch, dim):
    check_equal(flops.deep_linear_flops, batch, dim, 0, expected={"forward": 2 * batch * dim, "backward": 2 * batch * dim},
                why="with no hidden layer the head is the first layer: only its weight gradient")


@pytest.mark.rule("P4.deep-linear-flops")
@pytest.mark.parametrize("batch, dim, num_layers", [(0, 8, 2), (4, 0, 2), (0, 0, 0)])
def test_deep_linear_flops_with_a_count_of_zero(flops, batch, dim, num_layers):
    check_equal(flops.deep_linear_flops, batch, dim, num_layers, expected={"forward": 0, "backward": 0},
                why="0 is a count (only negative, non-whole or non-finite ones are refused): no rows or no features, "
                    "no FLOPs")


@pytest.mark.rule("P4.deep-linear-flops")
@settings(max_examples=20, deadline=None)
@given(batch=st.integers(1, 8), dim=st.integers(1, 8), num_layers=st.integers(1, 3))
def test_deep_linear_flops_matches_flop_counter(flops, batch, dim, num_layers):
    call(flops.deep_linear_flops, batch, dim, num_layers)  # a stub fails before the FLOP counter's first use
    check_equal(flops.deep_linear_flops, batch, dim, num_layers,
                expected=counted_deep_linear_flops(batch, dim, num_layers))


# --- MFU and training time -------------------------------------------------------------------

@pytest.mark.rule("P4.mfu")
def test_mfu_example(flops):
    check_close(flops.mfu, 1e12, 2.0, 1e12, expected=0.5, rtol=1e-12)
    check_close(flops.mfu, 4e14, 1.0, H100_BF16_PEAK, expected=4e14 / H100_BF16_PEAK, rtol=1e-12)
    check_close(flops.mfu, 3e12, 1.0, 1e12, expected=3.0, rtol=1e-12,
                why="not clipped: an MFU above 1 shows a wrong peak or a broken timing")
    check_close(flops.mfu, 7.0, 2.0, 10.0, expected=0.35, rtol=1e-12,
                why="(7 / 2) / 10: a time that does not divide the FLOPs, so a floor division shows")
    check_close(flops.mfu, 0.0, 1.0, 1e12, expected=0.0, why="no FLOPs is an MFU of 0 (only negative flops are refused)")


@pytest.mark.rule("P4.mfu-refuses")
@pytest.mark.parametrize("args", [(1e12, 0.0, 1e12), (1e12, -1.0, 1e12), (1e12, 1.0, 0.0), (1e12, 1.0, -1e12),
                                  (-1.0, 1.0, 1e12), (math.inf, 1.0, 1e12), (math.nan, 1.0, 1e12),
                                  (1e12, math.inf, 1e12), (1e12, math.nan, 1e12), (1e12, 1.0, math.inf),
                                  (1e12, 1.0, math.nan)], ids=repr)
def test_mfu_rejects_bad_arguments(flops, args):
    check_raises(ValueError, flops.mfu, *args,
                 why="flops must be finite and >= 0, seconds and the peak finite and > 0")


@pytest.mark.rule("P4.training-days")
def test_training_days_lecture_example(flops):
    # 70B parameters, 15T tokens, 1024 H100s at MFU 0.5: about 144 days.
    expected = 6 * 70e9 * 15e12 / (1024 * H100_BF16_PEAK * 0.5) / 86400
    check_close(flops.training_days, 70e9, 15e12, 1024, H100_BF16_PEAK, 0.5, expected=expected, rtol=1e-9)
    check_true(abs(expected - 143.9) < 0.05, "the lecture", expected, "about 143.9 days", "flops.training_days")


@pytest.mark.rule("P4.training-days-refuses")
@pytest.mark.parametrize("bad_mfu", [0.0, -0.5, 1.5, math.nan])
def test_training_days_rejects_mfu_outside_0_1(flops, bad_mfu):
    check_raises(ValueError, flops.training_days, 70e9, 15e12, 1024, H100_BF16_PEAK, bad_mfu,
                 why="MFU is a fraction of the peak: 0 < mfu <= 1")


@pytest.mark.rule("P4.training-days-refuses")
def test_training_days_rejects_no_gpus(flops):
    check_raises(ValueError, flops.training_days, 70e9, 15e12, 0, H100_BF16_PEAK, 0.5,
                 why="num_gpus below 1 is refused with ValueError (checked before dividing by it)")


@pytest.mark.rule("P4.training-days-refuses")
@pytest.mark.parametrize("args", [(70e9, 15e12, 2.5, H100_BF16_PEAK), (70e9, 15e12, -2, H100_BF16_PEAK),
                                  (70e9, 15e12, 1024, 0.0), (70e9, 15e12, 1024, -1e12), (70e9, 15e12, 1024, math.inf),
                                  (70e9, 15e12, 1024, math.nan), (-1, 15e12, 1024, H100_BF16_PEAK),
                                  (70e9, 2.5, 1024, H100_BF16_PEAK)], ids=repr)
def test_training_days_rejects_bad_gpus_peaks_and_counts(flops, args):
    check_raises(ValueError, flops.training_days, *args, 0.5,
                 why="num_gpus a whole number >= 1, the peak finite and > 0, counts non-negative whole numbers")


@pytest.mark.rule("P4.training-days")
def test_training_days_accepts_mfu_of_one(flops):
    check_close(flops.training_days, 1e9, 1e9, 1, 6e18 / 86400, 1.0, expected=1.0, rtol=1e-12)


# --- timing ---------------------------------------------------------------------------------
# The CPU timing tests hold on a busy machine: a correct mean of `repeats` products, times `repeats`,
# is never longer than the whole call (the clock of the call runs around the student's clock), and
# one product never takes less wall time than the CPU time it needs (measured here with the thread's
# CPU clock, which a busy machine does not slow). One thread: a multi-threaded product's wall time
# can be below its CPU time.

CPU_SIZE = 256
CPU_REPEATS = 32  # a total instead of a mean is then 32 times the mean: far above the whole call's time
SLACK = 3.0  # one product's wall time may read up to 3 times below our CPU-time measure (clock, cache)
CALLS = 3


@pytest.fixture
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@functools.cache  # CPU time, which load does not change: measured once for both tests
def cpu_seconds_of_one_product(size: int, at_least: float = 0.05) -> float:
    """The least thread CPU time of one float32 (size x size) product on one thread, over 3 loops of
    at least ``at_least`` CPU-seconds each (long enough for a coarse CPU clock, as on Windows)."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    torch.matmul(a, b)
    best = float("inf")
    for _ in range(3):
        count, start = 0, time.thread_time()
        while time.thread_time() - start < at_least:
            torch.matmul(a, b)
            count += 1
        best = min(best, (time.thread_time() - start) / count)
    return best


def timed_calls(fn: Callable[..., object], *args: object, **kwargs: object) -> list[tuple[object, float]]:
    """``fn``'s result (a failure on an exception) and the wall-clock seconds the call took, for CALLS
    calls: each bound below holds for every call of correct code, so one call is enough to show a
    mistake that a busy machine hides in the others."""
    results = []
    for _ in range(CALLS):
        start = time.perf_counter()
        got = call(fn, *args, **kwargs)
        results.append((got, time.perf_counter() - start))
    return results


def timing_hint(got: object, one_product: float, call_seconds: float, repeats: int) -> str:
    """The CPU timing mistake ``got`` shows, if it has that mistake's signature; nothing otherwise."""
    if not isinstance(got, float) or got <= 0:
        return ""
    if repeats > 2 and 0.5 * call_seconds <= got <= call_seconds:
        return f"your time is most of the whole call: the total of the {repeats} repeats, not their mean"
    if repeats > 2 and one_product / 2.5 <= got * repeats <= 2.5 * one_product:
        return (f"your time is about 1/{repeats} of one product: the clock stopped after the first product "
                "(or the time was divided by the repeats twice)")
    return ""


@pytest.mark.rule("P4.time-matmul")
def test_time_matmul_is_the_mean_of_one_product_on_cpu(flops, one_thread):
    size = CPU_SIZE
    calls = timed_calls(flops.time_matmul, size, size, size, torch.float32, "cpu", repeats=CPU_REPEATS)
    one_product = cpu_seconds_of_one_product(size)
    for got, seconds in calls:
        check_true(isinstance(got, float) and one_product / SLACK <= got and got * CPU_REPEATS <= seconds,
                   f"flops.time_matmul({size}, {size}, {size}, torch.float32, 'cpu', repeats={CPU_REPEATS})", got,
                   f"the mean of one product: at least {one_product / SLACK:.2e} s (a third of the CPU time one "
                   f"product needs here), and {CPU_REPEATS} of it within the whole call's {seconds:.2e} s",
                   "flops.time_matmul", hint=timing_hint(got, one_product, seconds, CPU_REPEATS))


@pytest.mark.rule("P4.time-matmul-inputs")
def test_time_matmul_draws_its_inputs_once(flops):
    next_draws = {}
    for repeats in (1, 9):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            call(flops.time_matmul, 16, 16, 16, torch.float32, "cpu", repeats=repeats)
            next_draws[repeats] = torch.rand(4)
    check_true(torch.equal(next_draws[1], next_draws[9]),
               "torch.manual_seed(0); flops.time_matmul(16, 16, 16, torch.float32, 'cpu', repeats=1), then the same "
               "with repeats=9", "torch's generator left at different points: the call with more repeats drew more "
               "random numbers", "the same random numbers drawn whatever repeats is", "flops.time_matmul",
               hint="draw the inputs once, before the clock starts, and multiply those same tensors in the timed loop")


@pytest.mark.rule("P4.time-matmul-refuses")
@pytest.mark.parametrize("args, repeats", [
    ((8, 8, 8, torch.float32), 0), ((8, 8, 8, torch.float32), -1), ((8, 8, 8, torch.float32), 2.5),
    ((-8, 8, 8, torch.float32), 2), ((8, 2.5, 8, torch.float32), 2), ((8, 8, 8, torch.int32), 2),
    ((8, 8, 8, torch.complex64), 2), ((8, 8, 8, torch.float8_e4m3fn), 2), ((8, 8, 8, torch.bool), 2),
], ids=repr)
def test_time_matmul_rejects_bad_arguments(flops, args, repeats):
    check_raises(ValueError, flops.time_matmul, *args, "cpu", repeats=repeats,
                 why="dtype float16, bfloat16, float32 or float64; repeats >= 1; counts non-negative whole numbers")


TIMED_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


@pytest.mark.rule("P4.time-matmul")
@pytest.mark.parametrize("device", ["cpu", torch.device("cpu")], ids=repr)
@pytest.mark.parametrize("dtype", TIMED_DTYPES, ids=str)
def test_time_matmul_takes_every_listed_dtype_and_either_device_spelling(flops, dtype, device):
    seconds = call(flops.time_matmul, 16, 16, 16, dtype, device, repeats=2)
    check_true(isinstance(seconds, float) and seconds > 0,
               f"flops.time_matmul(16, 16, 16, {dtype}, {device!r}, repeats=2)", seconds, "a positive number of seconds",
               "flops.time_matmul", "dtype is float16, bfloat16, float32 or float64, and device a str or a torch.device")


@pytest.mark.rule("P4.time-matmul-refuses")
def test_time_matmul_accepts_a_single_repeat(flops):
    seconds = call(flops.time_matmul, 8, 8, 8, torch.float32, "cpu", repeats=1)
    check_true(isinstance(seconds, float) and seconds > 0, "flops.time_matmul(8, 8, 8, torch.float32, 'cpu', repeats=1)",
               seconds, "a positive number of seconds", "flops.time_matmul",
               "repeats below 1 is refused: 1 is allowed (one product, timed)")


@pytest.mark.rule("P4.counts")
@pytest.mark.parametrize("bad", BAD_COUNTS, ids=repr)
def test_time_matmul_and_training_days_reject_bad_counts(flops, bad):
    why = "a count (sizes, repeats, tokens, parameters, GPUs) is a non-negative whole number, finite"
    for position in range(4):
        args = [8, 8, 8, 2]
        args[position] = bad
        check_raises(ValueError, flops.time_matmul, *args[:3], torch.float32, "cpu", repeats=args[3], why=why)
    for position in range(3):
        args = [70e9, 15e12, 1024]
        args[position] = bad
        check_raises(ValueError, flops.training_days, *args, H100_BF16_PEAK, 0.5, why=why)


@pytest.mark.rule("P4.matmul-mfu")
def test_matmul_mfu_on_cpu(flops, one_thread):
    size, peak = CPU_SIZE, 1e12
    calls = timed_calls(flops.matmul_mfu, size, size, size, torch.float32, "cpu", peak)
    flop = 2 * size**3
    highest = SLACK * flop / cpu_seconds_of_one_product(size) / peak
    for got, seconds in calls:
        lowest = flop / seconds / peak  # the call timed at least one product
        check_true(isinstance(got, float) and lowest <= got <= highest,
                   f"flops.matmul_mfu({size}, {size}, {size}, torch.float32, 'cpu', {peak:g})", got,
                   f"between {lowest:.2e} (one product taking the whole call) and {highest:.2e} (a product three "
                   "times faster than the CPU time it needs here)", "flops.matmul_mfu")


def gpu_peak() -> float:
    """Dense bf16 peak of this GPU if known, else an upper bound for any current GPU."""
    name = torch.cuda.get_device_name()
    return {"H100": H100_BF16_PEAK, "H200": H100_BF16_PEAK, "A100": 312e12}.get(
        next((key for key in ("H100", "H200", "A100") if key in name), ""), 2.5e15)


@pytest.mark.rule("P4.time-matmul-sync")
@pytest.mark.gpu
def test_time_matmul_is_synchronized_on_gpu(flops):
    n = 4096
    got = call(flops.time_matmul, n, n, n, torch.bfloat16, "cuda", repeats=10)
    want = reference_seconds(n, n, n, torch.bfloat16, "cuda", 10)
    check_true(isinstance(got, float) and want / 3 < got < want * 3,
               f"flops.time_matmul({n}, {n}, {n}, torch.bfloat16, 'cuda')", got,
               f"about {want:.2e} s (a synchronized timing)", "flops.time_matmul",
               "far too fast means the clock stopped before the GPU finished: torch.cuda.synchronize()",
               "your time is about 10 products long: the total of the 10 repeats, not their mean"
               if isinstance(got, float) and 4 * want <= got <= 25 * want else "")


@pytest.mark.rule("P4.matmul-mfu")
@pytest.mark.gpu
def test_matmul_mfu_on_gpu_is_at_most_one(flops):
    n, peak = 4096, gpu_peak()
    got = call(flops.matmul_mfu, n, n, n, torch.bfloat16, "cuda", peak)
    check_true(isinstance(got, float) and 0 < got <= 1, f"flops.matmul_mfu({n}, {n}, {n}, torch.bfloat16, 'cuda', {peak:g})",
               got, "a value in (0, 1]", "flops.matmul_mfu", "an MFU above 1 means the timing is not synchronized")
