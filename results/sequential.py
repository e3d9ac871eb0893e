"""Group-sequential tests for the claims (``results/claims.py``): looks at a few seed counts with Lan-DeMets alpha
spending, repeated confidence intervals, repeated p-values, Holm's step-down across a run's primary claims, and the
power of a plan.

Why by hand: scipy (1.17) has the t, normal and multivariate-normal distributions this is built from, but no
group-sequential design; statsmodels (not in this environment) has Holm and TOST but no spending-function
boundaries either. So the boundaries (Lan & DeMets 1983, O'Brien-Fleming-type spending; the recursion over looks
as in Jennison & Turnbull 2000, ch. 7) are computed here from ``scipy.stats.multivariate_normal``, and Holm (ten
lines) is written out rather than pulled in with a 30 MB dependency.

The plan, for a claim with looks at ``n_1 < ... < n_K`` seeds per arm (information fractions ``t_k = n_k / n_K``):

- two-sided z boundaries ``c_k`` with ``P(|Z_j| < c_j, j < k; |Z_k| >= c_k) = a(t_k) - a(t_{k-1})`` under H0, where
  ``a(t) = 2 - 2 Phi(z_{1-alpha/2} / sqrt(t))`` (O'Brien-Fleming-type spending) and ``corr(Z_j, Z_k) =
  sqrt(t_j / t_k)``;
- with few seeds the statistic is a t, not a z: each ``c_k`` is carried to the t scale at the same nominal tail
  probability (``t_{df}`` quantile of ``Phi(-c_k)``), the usual small-sample adjustment; the simulation in
  tests/results/test_sequential.py checks the false-positive rate of the whole plan against alpha;
- the repeated confidence interval at look k is ``diff -/+ q_k se`` (``q_k`` the t-scale boundary): it covers the
  true difference at every look at once with probability >= 1 - alpha, so a decision read off it at any look (and
  stopping there) keeps its error rate -- adding seeds is not optional stopping.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np
from scipy import optimize, stats

from results.claims_status import KINDS  # a claims file's kinds: read without SciPy (claims --status)

DIRECTIONAL = ("better", "no_worse")  # tested one-sided at alpha (similar: two one-sided tests, TOST)


def obf_spending(t: float | np.ndarray, alpha: float):
    """Lan-DeMets O'Brien-Fleming-type alpha spent by information fraction ``t`` (two-sided ``alpha``)."""
    t = np.asarray(t, float)
    return 2.0 - 2.0 * stats.norm.cdf(stats.norm.ppf(1 - alpha / 2) / np.sqrt(t))


@lru_cache(maxsize=4096)
def z_boundaries(alpha: float, looks: tuple[int, ...]) -> tuple[float, ...]:
    """Two-sided z boundaries ``c_1..c_K`` of the spending plan for ``looks`` (seed counts, ascending)."""
    if not looks or list(looks) != sorted(set(looks)) or looks[0] < 1:
        raise ValueError(f"looks {looks} must be ascending distinct seed counts")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha {alpha} is not in (0, 1)")
    frac = np.asarray(looks, float) / looks[-1]
    spent = obf_spending(frac, alpha)
    bounds: list[float] = []
    for k in range(len(looks)):
        if k == 0:
            bounds.append(float(stats.norm.ppf(1 - spent[0] / 2)))
            continue
        # P(no crossing up to look k) must equal 1 - spent[k]
        corr = np.sqrt(np.minimum.outer(frac[: k + 1], frac[: k + 1]) / np.maximum.outer(frac[: k + 1], frac[: k + 1]))
        mvn = stats.multivariate_normal(mean=np.zeros(k + 1), cov=corr)
        target = 1.0 - spent[k]

        def stay(c, mvn=mvn, k=k):
            upper = np.array([*bounds, c])
            return float(mvn.cdf(upper, lower_limit=-upper)) - target

        bounds.append(float(optimize.brentq(stay, 0.5, 12.0, xtol=1e-6)))
    return tuple(bounds)


def t_boundaries(alpha: float, looks: Sequence[int], dfs: Sequence[float]) -> list[float]:
    """The z boundaries carried to the t scale: the ``t_df`` quantile with the same two-sided tail probability."""
    z = z_boundaries(float(alpha), tuple(int(n) for n in looks))
    return [float(stats.t.isf(stats.norm.sf(c), df)) if math.isfinite(df) else c for c, df in zip(z, dfs)]


# ----------------------------------------------------------------------------------------- one look
@dataclass(frozen=True)
class Estimate:
    """The effect at one look: ``diff`` (points), its standard error and degrees of freedom, seeds per arm."""

    diff: float
    se: float
    df: float
    n: int


def paired_estimate(diffs: Sequence[float]) -> Estimate:
    """Mean of per-seed differences (arms share seed, data order and, where shapes match, initial weights)."""
    d = np.asarray(diffs, float)
    if len(d) < 2:
        return Estimate(float(d.mean()) if len(d) else math.nan, math.nan, math.nan, len(d))
    return Estimate(float(d.mean()), float(d.std(ddof=1) / math.sqrt(len(d))), float(len(d) - 1), len(d))


def welch_estimate(treatment: Sequence[float], baseline: Sequence[float]) -> Estimate:
    """mean(treatment) - mean(baseline), Welch-Satterthwaite degrees of freedom (arms that share no init)."""
    t, b = np.asarray(treatment, float), np.asarray(baseline, float)
    n = min(len(t), len(b))
    if n < 2:
        return Estimate(float(t.mean() - b.mean()), math.nan, math.nan, n)
    vt, vb = t.var(ddof=1) / len(t), b.var(ddof=1) / len(b)
    se = math.sqrt(vt + vb)
    df = (vt + vb) ** 2 / (vt**2 / (len(t) - 1) + vb**2 / (len(b) - 1)) if se > 0 else math.inf
    return Estimate(float(t.mean() - b.mean()), se, float(df), n)


def interval(est: Estimate, q: float) -> tuple[float, float]:
    """``diff -/+ q se`` (a zero standard error gives the point)."""
    half = q * est.se if est.se > 0 else 0.0
    return est.diff - half, est.diff + half


# ----------------------------------------------------------------------------------------- decisions
def decide(kind: str, low: float, high: float, margin: float, eq_low: float, eq_high: float) -> str | None:
    """The verdict a look reaches, or None (go on). ``low, high``: the two-sided repeated interval at alpha;
    ``eq_low, eq_high``: at 2 alpha (the TOST interval: each side a one-sided test at alpha)."""
    if kind == "better":  # directional: one-sided at alpha each way (the 2-alpha interval's ends)
        if eq_low > 0:
            return "supported"
        if eq_high < 0:
            return "contradicted"
        if -margin < eq_low and eq_high < margin:
            return "equivalent"
        return None
    if kind == "no_worse":
        if eq_low > -margin:
            return "supported"
        if eq_high < -margin:
            return "contradicted"
        return None
    if kind == "similar":
        if -margin < eq_low and eq_high < margin:
            return "equivalent"
        if low > margin or high < -margin:
            return "contradicted"
        return None
    raise ValueError(f"kind {kind!r} is not one of {', '.join(KINDS)}")


@dataclass(frozen=True)
class Look:
    n: int
    estimate: Estimate
    low: float  # repeated interval: two-sided at alpha (similar), at 2 alpha (directional kinds)
    high: float
    decision: str | None


def run_looks(
    kind: str, margin: float, alpha: float, looks: Sequence[int], estimates: Sequence[Estimate]
) -> list[Look]:
    """The looks reached, in order, each with its repeated interval and decision; stops at the first decision."""
    looks = tuple(int(n) for n in looks)
    dfs = [e.df if math.isfinite(e.df) else math.inf for e in estimates] + [math.inf] * (len(looks) - len(estimates))
    q, q2 = t_boundaries(alpha, looks, dfs), t_boundaries(min(2 * alpha, 0.999), looks, dfs)
    out = []
    for k, est in enumerate(estimates):
        if not math.isfinite(est.se):
            out.append(Look(est.n, est, math.nan, math.nan, None))
            continue
        low, high = interval(est, q[k])
        eq_low, eq_high = interval(est, q2[k])
        shown = (eq_low, eq_high) if kind in DIRECTIONAL else (low, high)  # one-sided at alpha: the 2-alpha ends
        out.append(Look(est.n, est, *shown, decide(kind, low, high, margin, eq_low, eq_high)))
        if out[-1].decision:
            break
    return out


def repeated_p(kind: str, margin: float, looks: Sequence[int], estimates: Sequence[Estimate]) -> float:
    """The smallest alpha at which the plan would have rejected the claim's null hypothesis by the last look in
    ``estimates`` (a repeated p-value: valid for Holm). better: H0 diff <= 0 (one-sided); no_worse: diff <= -margin;
    similar: |diff| >= margin (TOST: the larger of the two one-sided p-values)."""
    usable = [(k, e) for k, e in enumerate(estimates) if math.isfinite(e.se) and e.se > 0]
    if not usable:
        exact = [e for e in estimates if e.se == 0]
        return 0.0 if exact and _rejects_exactly(kind, margin, exact[-1].diff) else 1.0
    looks = tuple(int(n) for n in looks)
    dfs = [e.df for e in estimates] + [math.inf] * (len(looks) - len(estimates))

    def rejected(alpha: float) -> bool:
        q1 = t_boundaries(min(2 * alpha, 0.999), looks, dfs)
        for k, e in usable:
            if kind == "better" and e.diff / e.se >= q1[k]:
                return True
            if kind == "no_worse" and (e.diff + margin) / e.se >= q1[k]:
                return True
            if kind == "similar" and min(e.diff + margin, margin - e.diff) / e.se >= q1[k]:
                return True
        return False

    if not rejected(0.999 / 2):
        return 1.0
    lo, hi = 1e-9, 0.999 / 2
    if rejected(lo):
        return lo
    for _ in range(40):  # bisection on log alpha: monotone, ~1e-4 relative precision
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if rejected(mid) else (mid, hi)
    return hi


def _rejects_exactly(kind: str, margin: float, diff: float) -> bool:
    return {"better": diff > 0, "no_worse": diff > -margin, "similar": abs(diff) < margin}[kind]


def holm(pvalues: Sequence[float], alpha: float) -> list[float | None]:
    """Holm's step-down: for each hypothesis the level it was rejected at (alpha / (m - rank)), or None."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    levels: list[float | None] = [None] * m
    for rank, i in enumerate(order):
        level = alpha / (m - rank)
        if pvalues[i] > level:
            break
        levels[i] = level
    return levels


# ----------------------------------------------------------------------------------------- power
def power(
    effect: float,
    sd: float,
    alpha: float,
    looks: Sequence[int],
    kind: str = "better",
    margin: float = 0.0,
    simulations: int = 20_000,
) -> float:
    """Probability that the plan decides the claim, by simulation of the plan itself (t boundaries, the
    statistic recomputed at each look; a fixed random stream): better: "supported" when the true difference is
    ``effect``; no_worse / similar: "supported" / "equivalent" when it is 0. ``sd``: one seed's difference (for
    Welch claims the spread of the difference of two seeds, a paired approximation with fewer degrees of freedom
    than Welch's: conservative)."""
    looks = tuple(int(n) for n in looks)
    rng = np.random.default_rng(0)
    d = rng.standard_normal((simulations, looks[-1])) * sd + (effect if kind == "better" else 0.0)
    # every kind decides one-sided at alpha (better, no_worse) or by two one-sided tests (similar): the 2-alpha plan
    q2 = t_boundaries(min(2 * alpha, 0.999), looks, [n - 1 for n in looks])
    decided = np.zeros(simulations, bool)
    for k, n in enumerate(looks):
        x = d[:, :n]
        mean, se = x.mean(1), x.std(1, ddof=1) / np.sqrt(n) if n > 1 else np.full(simulations, np.inf)
        if kind == "better":
            decided |= mean - q2[k] * se > 0
        elif kind == "no_worse":
            decided |= mean - q2[k] * se > -margin
        else:
            decided |= (mean - q2[k] * se > -margin) & (mean + q2[k] * se < margin)
    return float(decided.mean())


def seeds_for_power(
    effect: float,
    sd: float,
    alpha: float,
    target: float,
    step: int,
    max_seeds: int,
    kind: str = "better",
    margin: float = 0.0,
) -> tuple[tuple[int, ...], float]:
    """The fewest seeds per arm (a multiple of ``step``, at most ``max_seeds``) whose plan -- looks every ``step``
    seeds -- has ``target`` power; ``max_seeds`` when none has. Returns ``(looks, power)``."""
    best = None
    for n in range(step, max_seeds + 1, step):
        looks = tuple(range(step, n + 1, step))
        p = power(effect, sd, alpha, looks, kind, margin)
        best = (looks, p)
        if p >= target:
            break
    if best is None:
        raise ValueError(f"max_seeds {max_seeds} is below the look step {step}")
    return best
