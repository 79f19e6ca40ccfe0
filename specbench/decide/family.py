"""A family's simultaneous level from how its claims co-vary (docs/metrics.md, "Verdict", its family).

The claims of the verdict table (drafter x concurrency) share their errors: a launch's effect is common to
every point measured in that launch (every concurrency of one drafter), the baseline's launches to every
drafter. Bonferroni ignores that and, on few df, spends a fraction of the error it states. The family's
critical value here is the (1 - alpha) quantile of max_k T_k, T_k = (ln S_k - ln S_k true) / se_k the
studentized error of claim k, simulated (seeded: deterministic) under the two-level model that the
intervals themselves use (decide/primary.py), on the scale of one point's launch-mean variance:

  several launches per variant ("launch units"): per variant and launch, one unit per claim group c
    (concurrency, temperature, rate) with variance rho + (1 - rho) / P_c and covariance rho across
    groups (a fraction rho of a launch's effect is shared by all its points, the rest is the point's own,
    repeats included); T_k is Welch's, from the units' means and variances, as mix_interval computes it.
  one launch per variant and a variance history ("history"): the launch effect shared by every point (the
    model mix_interval's variance assumes), each group's repeats its own; each claim's variance is the
    history's launch component (one chi^2 on its df, shared by the whole family) plus its repeat
    components (the run's own, on P_c (r - 1) df, or the history's, shared).

rho comes from the run's own launches (`launch_sharing`) and enters at its lower 97.5% bound, rounded down
to RHO_STEP; the history's repeat share is taken over its confidence interval, at the largest level
(`share_grid`). A run whose launches do not show a shared effect (bound <= 0), a family that mixes the two
regimes or has no model for a claim gets Bonferroni (`FamilyLevel.method` says which).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.stats

from specbench.decide.decision import ALPHA, t_quantile

TRIALS = 20_000  # draws of the family's max: the 2.5% tail holds ~500 of them (quantile within ~2%)
SEED = 50  # the simulation's seed: the same family always gets the same level
RHO_STEP = 0.05  # the sharing enters rounded down to this (so the level is one of few, cached)
SHARE_STEP = 0.05  # the history's repeat share enters on a grid of this step (share_grid)
SHARE_POINTS = 5  # shares simulated over the share's confidence interval; the level is the largest
Windows = dict[tuple[int, int], float]


@dataclass(frozen=True)
class ClaimShape:
    """What a claim's error depends on: its drafter, the baseline windows it shares with other drafters'
    claims (`group`), its points (effective: 1 / sum a_p^2 of its weights) and the two sides' launches and
    windows per point in a launch."""

    drafter: str
    group: Hashable
    points: float
    launches: int
    base_launches: int
    repeats: int = 1
    base_repeats: int = 1


@dataclass(frozen=True)
class HistoryShape:
    """The variance history a one-launch family's intervals use: the launch and repeat variances (log
    scale, CV^2) with their df (repeat_var NaN: none; then the run's own repeats estimate it)."""

    launch_var: float
    launch_df: float
    repeat_var: float
    repeat_df: float


@dataclass(frozen=True)
class Sharing:
    """The correlation of a launch's effects across its points, pooled over variants, on `df` df."""

    rho: float
    df: float

    def lower(self, confidence: float = 1 - ALPHA) -> float:
        """One-sided lower bound by Fisher's z (var 1 / (df - 2): df + 1 launches' worth); -1 when df <= 2."""
        if not (self.df > 2 and math.isfinite(self.rho)):
            return -1.0
        z = math.atanh(min(max(self.rho, -0.999999), 0.999999))
        return math.tanh(z - float(scipy.stats.norm.ppf(confidence)) / math.sqrt(self.df - 2))


@dataclass(frozen=True)
class FamilyLevel:
    """Critical values of the family's claims on the t scale: `one` for adopt and slower (every such error
    lies on one side), `two` for same (its errors may lie on either side), and how they were obtained.
    NaN: Bonferroni, each of the `claims` claims at alpha / claims on its own df."""

    one: float
    two: float
    method: str  # "max-t (launch units, rho 0.85)", "max-t (one launch and the variance history)", "Bonferroni ..."
    claims: int = 1
    alpha: float = ALPHA

    def quantile(self, df: float, same: bool = False) -> float:
        """The critical value a claim on df is re-drawn at."""
        q = self.two if same else self.one
        return q if math.isfinite(q) else t_quantile(df, self.alpha / max(1, self.claims))

    def bounds(self, low: float, high: float, df: float, same: bool = False) -> tuple[float, float]:
        """A claim's 95% interval on df re-drawn at this level: the same log centre, the half-width scaled
        by q / t_df(0.975). NaN in, NaN out."""
        if not (low > 0 and high > 0 and df > 0):
            return math.nan, math.nan
        c, half = (math.log(low) + math.log(high)) / 2, (math.log(high) - math.log(low)) / 2
        half *= self.quantile(df, same) / t_quantile(df)
        return math.exp(c - half), math.exp(c + half)


def launch_sharing(variants: Sequence[Sequence[Windows]]) -> Sharing | None:
    """rho from the run's launches: per variant (its points' windows), the log launch means of the launches
    measured at every one of its points, centred per point: E (launches x points). Pooled over variants,
    S = sum E'E; rho = mean off-diagonal of S / mean diagonal (the launch-mean variance a point shares with
    another, over its own; repeat noise counts as the point's own), on sum (n_v - 1) df. None without a
    variant of 2+ launches at 2+ points."""
    total: np.ndarray | None = None
    df = 0
    for cells in variants:
        if len(cells) < 2:
            continue
        common = sorted(set.intersection(*({la for la, _ in w} for w in cells)))
        if len(common) < 2:
            continue
        logs = np.array([[_log_launch_mean(w, la) for w in cells] for la in common])
        if not np.isfinite(logs).all():
            continue
        e = logs - logs.mean(axis=0)
        s = e.T @ e
        if total is not None and total.shape != s.shape:
            continue  # variants at other numbers of points: pooled over the first shape only
        total = s if total is None else total + s
        df += len(common) - 1
    if total is None or not np.trace(total) > 0:
        return None
    p = total.shape[0]
    off = (total.sum() - np.trace(total)) / (p * (p - 1))
    return Sharing(float(off / (np.trace(total) / p)), float(df))


def _log_launch_mean(w: Windows, launch: int) -> float:
    vals = [v for (la, _), v in w.items() if la == launch and math.isfinite(v)]
    m = sum(vals) / len(vals) if vals else math.nan
    return math.log(m) if m > 0 else math.nan


def bonferroni(claims: int, alpha: float, reason: str) -> FamilyLevel:
    """The union bound, whatever the claims' dependence: each claim at alpha / K on its own df."""
    return FamilyLevel(math.nan, math.nan, f"Bonferroni ({reason})", claims, alpha)


def family_level(claims: Sequence[ClaimShape], alpha: float, sharing: Sharing | None,
                 history: HistoryShape | None) -> FamilyLevel:
    """The family's level for `claims` at family-wise `alpha` per outcome (see the module's docstring)."""
    if not claims:
        return bonferroni(0, alpha, "no claims")
    multi = all(c.launches >= 2 and c.base_launches >= 2 for c in claims)
    single = all(c.launches == 1 and c.base_launches == 1 for c in claims)
    groups = _groups(claims)
    if multi:
        low = sharing.lower() if sharing is not None else -1.0
        if not low > 0:
            why = "no launch sharing measured" if sharing is None else \
                f"launch effects' correlation across points {sharing.rho:.2f}, lower bound {low:.2f} <= 0"
            return bonferroni(len(claims), alpha, why)
        rho = math.floor(low / RHO_STEP) * RHO_STEP
        base_n = {c.base_launches for c in claims}
        if len(base_n) != 1:
            return bonferroni(len(claims), alpha, "the baseline's launches differ between points")
        one, two = _units_quantiles(_key(claims, groups), rho, alpha)
        return FamilyLevel(one, two, f"max-t (launch units, rho {rho:.2f})", len(claims), alpha)
    if single and history is not None and history.launch_df > 0 and history.launch_var > 0:
        rep = history.repeat_var if math.isfinite(history.repeat_var) and history.repeat_var >= 0 else 0.0
        if any(c.repeats < 2 or c.base_repeats < 2 for c in claims) and not (rep > 0 and history.repeat_df > 0):
            return bonferroni(len(claims), alpha, "no repeat variance for a point measured once")
        key = _key(claims, groups)
        levels = [_history_quantiles(key, share, _df(history.launch_df), _df(history.repeat_df), alpha)
                  for share in share_grid(history)]
        return FamilyLevel(max(q[0] for q in levels), max(q[1] for q in levels),
                           "max-t (one launch and the variance history)", len(claims), alpha)
    return bonferroni(len(claims), alpha, "launches differ between claims" if not single else "no variance history")


def repeat_share(history: HistoryShape, confidence: float = 1 - ALPHA, upper: bool = False) -> float:
    """The repeats' share of a point's variance, sigma_R^2 / (sigma_R^2 + sigma_L^2), at its lower bound (the
    launch variance at its upper `confidence` bound, the repeat variance at its lower one, each by its chi^2
    on its df), rounded down to SHARE_STEP; with `upper`, at its upper bound, rounded up."""
    rep = history.repeat_var if math.isfinite(history.repeat_var) and history.repeat_var > 0 else 0.0
    ldf, rdf, q = _df(history.launch_df), _df(history.repeat_df), (confidence, 1 - confidence)[::1 if upper else -1]
    launch, repeat = history.launch_var * ldf / float(scipy.stats.chi2.ppf(q[0], ldf)), \
        (rep * rdf / float(scipy.stats.chi2.ppf(q[1], rdf)) if rep > 0 else 0.0)
    share = repeat / (repeat + launch) if repeat + launch > 0 else 0.0
    return min(1.0, round((math.ceil(share / SHARE_STEP - 1e-9) if upper else math.floor(share / SHARE_STEP))
                          * SHARE_STEP, 6))


def share_grid(history: HistoryShape, points: int = SHARE_POINTS) -> list[float]:
    """The repeat shares the level is simulated at, `points` steps over the share's confidence interval. The
    level is the largest: the share moves it both ways (docs/metrics.md, "Verdict")."""
    lo, hi = repeat_share(history), repeat_share(history, upper=True)
    if hi <= lo:
        return [lo]
    steps = {round(lo / SHARE_STEP + (hi - lo) / SHARE_STEP * i / (points - 1)) for i in range(points)}
    grid = {min(1.0, round(k * SHARE_STEP, 6)) for k in steps}
    return sorted(grid | {lo, hi})


def _df(df: float) -> float:
    return df if math.isfinite(df) and df > 0 else 1e6


def _groups(claims: Sequence[ClaimShape]) -> dict[Hashable, int]:
    out: dict[Hashable, int] = {}
    for c in claims:
        out.setdefault(c.group, len(out))
    return out


Key = tuple[tuple[int, int, float, int, int, int, int], ...]  # (drafter, group, points, n, n_b, r, r_b)


def _key(claims: Sequence[ClaimShape], groups: dict[Hashable, int]) -> Key:
    drafters: dict[str, int] = {}
    return tuple((drafters.setdefault(c.drafter, len(drafters)), groups[c.group], round(c.points, 3), c.launches,
                  c.base_launches, c.repeats, c.base_repeats) for c in claims)


def _quantiles(t: np.ndarray, alpha: float) -> tuple[float, float]:
    return float(np.quantile(t.max(axis=1), 1 - alpha)), float(np.quantile(np.abs(t).max(axis=1), 1 - alpha))


def _group_points(key: Key) -> dict[int, float]:
    return {g: p for _, g, p, *_ in key}


Side = Callable[[list[int], int], tuple[np.ndarray, np.ndarray]]  # (groups, n or r) -> a variant's two draws


def _claims_t(key: Key, side: Side, own: int, base: int,
              t: Callable[[tuple[np.ndarray, np.ndarray], int, tuple[np.ndarray, np.ndarray], int], np.ndarray],
              ) -> np.ndarray:
    """T (draws x claims): the baseline's side drawn over every group (key field `base` its n or r), then each
    drafter's over its groups (field `own`), and t(drafter's, its column, baseline's, the group's column)."""
    groups = sorted(_group_points(key))
    b = side(groups, int(key[0][base]))
    cols = []
    for d in sorted({k[0] for k in key}):
        mine = [k for k in key if k[0] == d]
        x = side([k[1] for k in mine], int(mine[0][own]))
        cols += [t(x, j, b, groups.index(k[1])) for j, k in enumerate(mine)]
    return np.column_stack(cols)


@functools.lru_cache(maxsize=256)
def _units_quantiles(key: Key, rho: float, alpha: float) -> tuple[float, float]:
    """Launch units of every variant drawn (seeded) as the model says; Welch's T of each claim."""
    rng = np.random.default_rng(SEED)
    pts = _group_points(key)

    def side(groups: list[int], n: int) -> tuple[np.ndarray, np.ndarray]:
        cov = np.full((len(groups), len(groups)), rho) + np.diag([(1 - rho) / pts[g] for g in groups])
        y = rng.standard_normal((TRIALS, n, len(groups))) @ np.linalg.cholesky(cov).T
        return y.mean(axis=1), y.var(axis=1, ddof=1) / n

    def welch(d: tuple[np.ndarray, np.ndarray], j: int, b: tuple[np.ndarray, np.ndarray], g: int) -> np.ndarray:
        return (d[0][:, j] - b[0][:, g]) / np.sqrt(d[1][:, j] + b[1][:, g])

    return _quantiles(_claims_t(key, side, 3, 4, welch), alpha)


@functools.lru_cache(maxsize=256)
def _history_quantiles(key: Key, repeat_share: float, launch_df: float, repeat_df: float,
                       alpha: float) -> tuple[float, float]:
    """One launch per variant: a launch effect (variance 1 - share) shared by its groups, repeats (variance
    share / (r P_c)) per group; the history's launch variance on its df shared by every claim, the repeat
    variances the run's own (r >= 2: P_c (r - 1) df per variant and group) or the history's (shared)."""
    rng = np.random.default_rng(SEED)
    pts = _group_points(key)
    lv, rv = 1.0 - repeat_share, repeat_share
    w_launch = rng.chisquare(launch_df, TRIALS) / launch_df
    w_repeat = rng.chisquare(repeat_df, TRIALS) / repeat_df

    def side(groups: list[int], r: int) -> tuple[np.ndarray, np.ndarray]:
        """Errors (TRIALS x groups) and the repeat variance as estimated, per group."""
        rep = np.array([rv / (r * pts[g]) for g in groups])
        shared = math.sqrt(lv) * rng.standard_normal((TRIALS, 1))
        err = shared + rng.standard_normal((TRIALS, len(groups))) * np.sqrt(rep)
        if r >= 2:
            dfs = np.array([pts[g] * (r - 1) for g in groups])
            est = rep * rng.chisquare(dfs, (TRIALS, len(groups))) / dfs
        else:
            est = rep * w_repeat[:, None]
        return err, est

    def studentized(d: tuple[np.ndarray, np.ndarray], j: int, b: tuple[np.ndarray, np.ndarray], g: int) -> np.ndarray:
        return (d[0][:, j] - b[0][:, g]) / np.sqrt(2 * lv * w_launch + d[1][:, j] + b[1][:, g])

    return _quantiles(_claims_t(key, side, 5, 6, studentized), alpha)
