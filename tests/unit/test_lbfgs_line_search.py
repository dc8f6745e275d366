"""LBFGS's strong-Wolfe line search and cubic interpolation, on host functions (no connection):
the step it returns satisfies the strong Wolfe conditions (Nocedal & Wright, 3.7)."""

from __future__ import annotations

import math

import pytest

from gt.optim.lbfgs import _Pair, _Point, cubic_interpolate, strong_wolfe


def test_cubic_interpolate_finds_the_minimizer_of_an_exact_cubic():
    # f(x) = x^3 - 3x: f(0) = 0, f'(0) = -3, f(2) = 2, f'(2) = 9; local minimum at x = 1.
    assert cubic_interpolate(0.0, 0.0, -3.0, 2.0, 2.0, 9.0) == pytest.approx(1.0)
    assert cubic_interpolate(2.0, 2.0, 9.0, 0.0, 0.0, -3.0) == pytest.approx(1.0)  # either order


def test_cubic_interpolate_clamps_to_bounds_and_falls_back_to_the_middle():
    assert cubic_interpolate(0.0, 0.0, -3.0, 2.0, 2.0, 9.0, bounds=(1.5, 4.0)) == 1.5
    # d1^2 - g1*g2 < 0: the cubic has no minimizer, so the middle of the bounds
    assert cubic_interpolate(0.0, 0.0, 1.0, 1.0, 2.0 / 3.0, 1.0, bounds=(2.0, 4.0)) == 3.0
    assert cubic_interpolate(1.0, 0.0, -1.0, 1.0, 0.0, -1.0, bounds=(0.0, 2.0)) == 1.0


def _line(f, df):
    """``probe`` and the start point for the 1-D function ``phi(t) = f(t)``, with ``d = 1``."""
    calls = []

    def probe(t):
        calls.append(t)
        return _Point(t, f(t), None, df(t), abs(df(t)), _Pair(None, None, 0.0))

    return probe, _Point(0.0, f(0.0), None, df(0.0), abs(df(0.0)), _Pair(None, None, 0.0)), calls


CASES = {
    # a quadratic whose minimum (t = 3) is beyond the first trial: extrapolation
    "extrapolate": (lambda t: (t - 3.0) ** 2, lambda t: 2.0 * (t - 3.0), 0.1),
    # a steep valley at t = 0.05, first trial far past it: zoom
    "zoom": (lambda t: (t - 0.05) ** 2 + 0.1 * t**4, lambda t: 2.0 * (t - 0.05) + 0.4 * t**3, 1.0),
    # non-convex along the line
    "wavy": (lambda t: -math.sin(3.0 * t) + 0.5 * t, lambda t: -3.0 * math.cos(3.0 * t) + 0.5, 1.0),
}


@pytest.mark.parametrize("name", list(CASES))
def test_strong_wolfe_returns_a_step_satisfying_both_conditions(name):
    f, df, t0 = CASES[name]
    probe, start, calls = _line(f, df)
    point, evals = strong_wolfe(probe, start, t0, d_norm=1.0)
    c1, c2 = 1e-4, 0.9
    assert point.f <= start.f + c1 * point.t * start.gtd  # sufficient decrease
    assert abs(point.gtd) <= -c2 * start.gtd  # curvature (strong)
    assert evals == len(calls) and point.t in calls


def test_strong_wolfe_accepts_the_first_trial_when_it_already_satisfies_them():
    probe, start, calls = _line(lambda t: (t - 1.0) ** 2, lambda t: 2.0 * (t - 1.0))
    point, evals = strong_wolfe(probe, start, 1.0, d_norm=1.0)
    assert (point.t, evals, calls) == (1.0, 1, [1.0])


def test_strong_wolfe_gives_up_after_max_ls_evaluations():
    # Always decreasing (never bracketed): 25 extrapolations, then it returns the better end.
    probe, start, calls = _line(lambda t: -t, lambda t: -1.0)
    point, evals = strong_wolfe(probe, start, 1.0, d_norm=1.0, max_ls=5)
    assert evals == 6 == len(calls) and point.t == calls[-1] and point.f < start.f
