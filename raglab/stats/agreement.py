"""Agreement between two raters (a grader and people) and among repeated judgments.

Pure numpy; every function takes label *codes* (integers ``0..k-1`` into an ordered label
list) so it is cheap to call on thousands of bootstrap resamples at once.

- :func:`confusion_matrix`: rows are the reference rater (people), columns the other one.
- :func:`cohen_kappa`: Cohen's kappa, ``1 - sum(w * p_observed) / sum(w * p_expected)``
  with disagreement weights ``w`` (0 on the diagonal, 1 off it; ``quadratic``:
  ``(i - j)^2 / (k - 1)^2``, for ordered labels). Undefined (None) when chance agreement is
  perfect (both raters always use one and the same label).
- :func:`fleiss_kappa`: Fleiss' kappa of an ``items x categories`` count table where every
  item has the same number of ratings (Fleiss 1971).
- :func:`agreement_summary`: every figure above plus accuracy, per-label precision and
  recall, and the share of a chosen "lenient" cell block, each with a seeded percentile
  bootstrap interval (items resampled with replacement).

A figure that does not apply (no item with that label; zero denominator) is ``None``, never
NaN; bootstrap replicates where it is undefined are left out of its interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 20240917


def confusion_matrix(ref: Sequence[int] | np.ndarray, other: Sequence[int] | np.ndarray,
                     k: int) -> np.ndarray:
    """``k x k`` counts: ``[i, j]`` = items the reference put in ``i`` and the other in ``j``."""
    r, o = np.asarray(ref, dtype=np.int64), np.asarray(other, dtype=np.int64)
    if r.shape != o.shape:
        raise ValueError("both raters must judge the same items")
    return np.bincount(r * k + o, minlength=k * k).reshape(k, k)


def _weights(k: int, weights: str | None) -> np.ndarray:
    i, j = np.indices((k, k))
    if weights is None:
        return (i != j).astype(float)
    if weights == "quadratic":
        return ((i - j) ** 2 / max(1, (k - 1) ** 2)).astype(float)
    if weights == "linear":
        return (np.abs(i - j) / max(1, k - 1)).astype(float)
    raise ValueError(f"unknown weights {weights!r}")


def _kappa_stack(cms: np.ndarray, weights: str | None) -> np.ndarray:
    """Kappa of every ``k x k`` matrix of a ``(..., k, k)`` stack (NaN where undefined)."""
    cms = np.asarray(cms, dtype=float)
    k = cms.shape[-1]
    w = _weights(k, weights)
    n = cms.sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        p = cms / n[..., None, None]
        expected = p.sum(axis=-1)[..., :, None] * p.sum(axis=-2)[..., None, :]
        observed_d = (w * p).sum(axis=(-2, -1))
        expected_d = (w * expected).sum(axis=(-2, -1))
        out = 1.0 - observed_d / expected_d
    return np.where(expected_d > 1e-12, out, np.nan)


def _none(x: Any) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


def cohen_kappa(ref: Sequence[int], other: Sequence[int], k: int,
                weights: str | None = None) -> float | None:
    """Cohen's kappa (``weights``: None, ``"linear"`` or ``"quadratic"``); None if undefined."""
    if len(ref) == 0:
        return None
    return _none(_kappa_stack(confusion_matrix(ref, other, k), weights))


def fleiss_kappa(counts: np.ndarray | Sequence[Sequence[int]]) -> float | None:
    """Fleiss' kappa of an ``items x categories`` table of rating counts (each row the same
    total, at least 2). None when undefined (every rating in one category)."""
    t = np.asarray(counts, dtype=float)
    if t.ndim != 2 or t.shape[0] == 0:
        return None
    n = t.sum(axis=1)
    if not np.all(n == n[0]) or n[0] < 2:
        raise ValueError("every item needs the same number (>= 2) of ratings")
    m = n[0]
    p_item = ((t * t).sum(axis=1) - m) / (m * (m - 1))
    p_cat = t.sum(axis=0) / t.sum()
    pe = float((p_cat ** 2).sum())
    if pe >= 1 - 1e-12:
        return None
    return float((p_item.mean() - pe) / (1 - pe))


def all_agree_share(counts: np.ndarray | Sequence[Sequence[int]]) -> float | None:
    """Share of items whose ratings all fall in one category."""
    t = np.asarray(counts)
    if t.ndim != 2 or t.shape[0] == 0:
        return None
    return float(np.mean(t.max(axis=1) == t.sum(axis=1)))


def _figures(cms: np.ndarray, weighted: bool, lenient: tuple[Sequence[int], int] | None
             ) -> dict[str, np.ndarray]:
    """Every figure of a ``(..., k, k)`` stack of confusion matrices (NaN where undefined)."""
    cms = np.asarray(cms, dtype=float)
    n = cms.sum(axis=(-2, -1))
    diag = np.diagonal(cms, axis1=-2, axis2=-1)
    rows, cols = cms.sum(axis=-1), cms.sum(axis=-2)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = {"kappa": _kappa_stack(cms, None), "accuracy": diag.sum(axis=-1) / n,
               "precision": np.where(cols > 0, diag / cols, np.nan),
               "recall": np.where(rows > 0, diag / rows, np.nan)}
        if weighted:
            out["weighted_kappa"] = _kappa_stack(cms, "quadratic")
        if lenient is not None:
            ref_labels, other_label = lenient
            ref_labels = list(ref_labels)
            hit = cms[..., ref_labels, other_label].sum(axis=-1)
            base = cms[..., ref_labels, :].sum(axis=(-2, -1))
            out["leniency"] = np.where(base > 0, hit / base, np.nan)
    out["confusion"] = cms
    return out


def _interval(samples: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    a = (1 - level) / 2 * 100
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(samples)
        lo = np.full(samples.shape[1:], np.nan)
        hi = np.full(samples.shape[1:], np.nan)
        flat = samples.reshape(samples.shape[0], -1)
        okf = ok.reshape(ok.shape[0], -1)
        for j in range(flat.shape[1]):
            vals = flat[okf[:, j], j]
            if vals.size:
                lo.flat[j], hi.flat[j] = np.percentile(vals, [a, 100 - a])
    return lo, hi


def _est(point: float, lo: float, hi: float) -> dict[str, float | None]:
    p = _none(point)
    if p is None:
        return {"value": None, "ci_low": None, "ci_high": None}
    return {"value": p, "ci_low": _none(lo), "ci_high": _none(hi)}


def agreement_summary(ref: Sequence[int], other: Sequence[int], labels: Sequence[str], *,
                      weighted: bool = False,
                      lenient: tuple[Sequence[str], str] | None = None,
                      n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                      level: float = 0.95) -> dict[str, Any]:
    """Agreement of ``other`` with the reference ``ref`` (label codes into ``labels``).

    Returns ``kappa``, ``ci_low``, ``ci_high``, ``n``, ``accuracy``, ``weighted_kappa``
    (when ``weighted``), ``per_label`` (``{label: {precision, recall, support}}``),
    ``confusion`` (``{labels, counts, ci_low, ci_high}``, rows = reference) and ``leniency``
    (``lenient=(reference labels, other label)``: the share of items the reference put in
    those labels that the other rater put in that label). Estimates are dicts
    ``{value, ci_low, ci_high}``, except ``kappa``, whose interval sits beside it.
    """
    k = len(labels)
    ref_a, oth_a = np.asarray(ref, dtype=np.int64), np.asarray(other, dtype=np.int64)
    n = int(ref_a.size)
    idx_of = {lab: i for i, lab in enumerate(labels)}
    len_codes = None
    if lenient is not None:
        len_codes = ([idx_of[x] for x in lenient[0]], idx_of[lenient[1]])
    cm = confusion_matrix(ref_a, oth_a, k)
    point = _figures(cm, weighted, len_codes)
    if n:
        rng = np.random.default_rng(seed)
        draws = rng.integers(0, n, size=(n_resamples, n))
        codes = (ref_a * k + oth_a)[draws] + (np.arange(n_resamples) * k * k)[:, None]
        cms = np.bincount(codes.ravel(), minlength=n_resamples * k * k).reshape(
            n_resamples, k, k)
        boot = _figures(cms, weighted, len_codes)
        ci = {name: _interval(vals, level) for name, vals in boot.items()}
    else:
        nan = np.full((k, k), np.nan)
        ci = {name: (np.full(np.shape(v), np.nan), np.full(np.shape(v), np.nan))
              for name, v in point.items()}
        ci["confusion"] = (nan, nan)

    def est(name: str, i: int | None = None) -> dict[str, float | None]:
        p, (lo, hi) = point[name], ci[name]
        if i is not None:
            return _est(p[i], lo[i], hi[i])
        return _est(float(p), float(lo), float(hi))

    kap = est("kappa")
    out: dict[str, Any] = {"n": n, "kappa": kap["value"], "ci_low": kap["ci_low"],
                           "ci_high": kap["ci_high"], "accuracy": est("accuracy")}
    if weighted:
        out["weighted_kappa"] = est("weighted_kappa")
    out["per_label"] = {lab: {"precision": est("precision", i), "recall": est("recall", i),
                              "support": int(cm[i].sum())} for i, lab in enumerate(labels)}
    lo, hi = ci["confusion"]
    out["confusion"] = {"labels": list(labels), "rows": "human", "columns": "grader",
                        "counts": cm.astype(int).tolist(),
                        "ci_low": [[_none(x) for x in row] for row in lo.tolist()],
                        "ci_high": [[_none(x) for x in row] for row in hi.tolist()]}
    if lenient is not None and len_codes is not None:
        out["leniency"] = {**est("leniency"), "human": list(lenient[0]), "grader": lenient[1],
                           "n": int(cm[len_codes[0], :].sum())}
    out["bootstrap"] = {"resamples": n_resamples, "seed": seed, "level": level,
                        "method": "percentile"}
    return out
