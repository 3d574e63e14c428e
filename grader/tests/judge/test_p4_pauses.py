"""P4's paused rounds judge a timing by what the judge measures from outside in the same call
(``Call.stretch``: the pauses, and the share of a core the worker had while ready to run, from the
CPU time it spent and how long it waited for a CPU), so that load on the machine neither helps a forecast
nor hurts a timer of the products, and a call that also sleeps is judged by its products alone. Rounds
are built as such calls measure: a product needs CPU seconds of CPU time, and a process that is ready to
run gets a share ``core`` of a core during the 1 - ``stopped`` of the wall time it is not stopped."""

from __future__ import annotations

import itertools

import pytest

from grader.judge.drivers.flops import Rounds
from grader.judge.hidden.test_p4_flops import CPU_BAND, PAUSED, ROUNDS, assert_follows_pauses, assert_timing

CPU, REPEATS = 0.0025, 32  # seconds of CPU time per 512^3 product; products per call


def rounds(free: float, paused: float, spent: float, core: float, stopped: float, slept: float = 0.0,
           told: bool = True) -> Rounds:
    """ROUNDS unpaused rounds answering ``free`` and PAUSED paused ones answering ``paused``, each spending
    ``spent`` CPU seconds (and sleeping ``slept`` seconds) with ``core`` of a core while ready to run; the
    judge is ``told`` how long the worker waited for a CPU, or not (a kernel without schedstat)."""
    return answered([(paused if share else free, spent, share) for share in [0.0] * ROUNDS + [stopped] * PAUSED],
                    core, slept, told)


def answered(calls: list[tuple[float, float, float]], core: float, slept: float = 0.0, told: bool = True) -> Rounds:
    """Rounds of (answer, CPU seconds spent, share stopped) calls, measured as ``rounds`` says."""
    found = Rounds()
    for answer, spent, share in calls:
        found.reference.append(CPU)
        found.reference_cpu.append(CPU)
        found.student.append(answer)
        found.spent.append(spent)
        found.waited.append(spent * (1 / core - 1) if told else None)
        found.wall.append(spent / (core * (1 - share)) + slept)
        found.stopped.append(share)
    return found


def honest(core: float, stopped: float, told: bool = True) -> Rounds:
    """A timer of the products (three warm-up products first): it reports the wall time they took."""
    return rounds(CPU / core, CPU / (core * (1 - stopped)), (REPEATS + 3) * CPU, core, stopped, told=told)


def forecast(core: float, stopped: float, at: float) -> Rounds:
    """One small product timed with ``at`` of a core, scaled up, then spun out on the CPU clock for the
    products: it reports CPU / ``at``, paused or not (unpaused: forecast with twice that share)."""
    return rounds(CPU / min(1.0, 2 * at), CPU / at, REPEATS * CPU / at, core, stopped)


@pytest.mark.parametrize("told", [True, False])
@pytest.mark.parametrize("core, stopped", [(1.0, 0.95), (0.3, 0.8), (0.5, 0.9)])
def test_a_timer_of_the_products_follows_the_pauses_under_any_load(core, stopped, told):
    assert_follows_pauses(honest(core, stopped, told), "time_matmul")


@pytest.mark.parametrize("core, stopped, at", [(1.0, 0.95, 1.0), (0.3, 0.8, 0.3), (0.5, 0.9, 0.5)])
def test_a_forecast_does_not_follow_them_under_load(core, stopped, at):
    # (0.3, 0.8, 0.3): a machine that leaves the worker 30% of a core throughout, the judge's thread waking
    # late (stopped 80% of the call). The forecast reports 3.3 products' CPU time: above a quarter of the CPU
    # time over the share not stopped (1.25), which a check blind to the load passed, and twice its fastest
    # unpaused answer.
    with pytest.raises(AssertionError, match="a forecast does not"):
        assert_follows_pauses(forecast(core, stopped, at), "time_matmul")


@pytest.mark.parametrize("core", [1.0, 0.5])
def test_a_call_that_also_sleeps_is_judged_by_its_products(core):
    # One product timed (the pauses stretch it), the rest of the call slept through: 4 products' CPU time
    # (with the warm-up) in 13 products' wall time, which wall time over CPU time alone would blame.
    one = CPU / (core * 0.05)
    found = rounds(CPU / core, one, 4 * CPU, core, 0.95, slept=9 * one)
    assert_follows_pauses(found, "matmul_mfu")


@pytest.mark.parametrize("core", [1.0, 0.3])
def test_a_schedule_of_answers_passes_only_where_it_guessed_every_paused_place(core):
    # A schedule that spins the products' CPU time, answers the forecast in some calls and 12 times it in
    # others (sleeping the call out to cover what it reports) passes only where its large answers fall on
    # exactly the paused rounds: once in C(ROUNDS + PAUSED, PAUSED) placements, however many are large.
    calls = ROUNDS + PAUSED
    for large in range(calls + 1):
        passed = 0
        for places in itertools.combinations(range(calls), PAUSED):
            found = answered([((12 if i < large else 1) * CPU / core, REPEATS * CPU, 0.92 if i in places else 0.0)
                              for i in range(calls)], core, slept=12 * REPEATS * CPU)
            try:
                assert_follows_pauses(found, "time_matmul")
                passed += 1
            except AssertionError:
                pass
        assert passed == (large == PAUSED), (large, passed)


@pytest.mark.parametrize("answer, stretched, agrees", [(CPU, 9, True), (REPEATS * CPU, 2, False),
                                                      (CPU / 100, 9, False)])
def test_the_judges_own_timing_stretched_by_load_does_not_fail_a_timer(answer, stretched, agrees):
    # Every round of the judge descheduled (its products took ``stretched`` times their CPU time), the worker
    # once ran unhindered: a timer of one product agrees with the judge's CPU time (with its stretched wall time
    # alone, 9 times it, it failed); a total (repeats times) or a timer that skipped the products agrees with neither.
    found = rounds(answer, answer, (REPEATS + 3) * CPU, 1.0, 0.92)
    found.reference[:] = [stretched * CPU] * len(found.reference)
    found.wall[:] = [max(wall, answer * REPEATS) for wall in found.wall]  # each call as long as it reports
    if agrees:
        assert_timing(found, "time_matmul", CPU_BAND, REPEATS)
    else:
        with pytest.raises(AssertionError, match="within a factor"):
            assert_timing(found, "time_matmul", CPU_BAND, REPEATS)
