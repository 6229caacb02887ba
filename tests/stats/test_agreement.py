"""Known answers for raglab.stats.agreement (hand-computed and published values)."""

from __future__ import annotations

import numpy as np
import pytest

from raglab.stats.agreement import (
    agreement_summary,
    all_agree_share,
    cohen_kappa,
    confusion_matrix,
    fleiss_kappa,
)


def _wiki_cohen():
    # Wikipedia "Cohen's kappa", worked example: 50 proposals, yes/yes 20, yes/no 5,
    # no/yes 10, no/no 15: p_o = 0.7, p_e = 0.5, kappa = 0.4
    a = [0] * 20 + [0] * 5 + [1] * 10 + [1] * 15
    b = [0] * 20 + [1] * 5 + [0] * 10 + [1] * 15
    return a, b


def test_cohen_kappa_published_example():
    a, b = _wiki_cohen()
    assert cohen_kappa(a, b, 2) == pytest.approx(0.4)
    assert confusion_matrix(a, b, 2).tolist() == [[20, 5], [10, 15]]


def test_weighted_and_unweighted_by_hand():
    # ref [0,1,2,2], other [0,2,2,1]: p_o = 0.5, p_e = 0.375 -> 0.2; quadratic weights:
    # observed disagreement 0.125, expected 0.34375 -> 1 - 0.125/0.34375 = 7/11
    ref, oth = [0, 1, 2, 2], [0, 2, 2, 1]
    assert cohen_kappa(ref, oth, 3) == pytest.approx(0.2)
    assert cohen_kappa(ref, oth, 3, weights="quadratic") == pytest.approx(7 / 11)


def test_against_sklearn_when_available():
    sk = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(3)
    ref = rng.integers(0, 3, 200)
    oth = np.where(rng.random(200) < 0.6, ref, rng.integers(0, 3, 200))
    assert cohen_kappa(ref, oth, 3) == pytest.approx(sk.cohen_kappa_score(ref, oth))
    assert cohen_kappa(ref, oth, 3, "quadratic") == pytest.approx(
        sk.cohen_kappa_score(ref, oth, weights="quadratic"))


def test_kappa_undefined_is_none():
    assert cohen_kappa([1, 1, 1], [1, 1, 1], 3) is None
    assert cohen_kappa([], [], 3) is None


def test_fleiss_published_example():
    # Wikipedia "Fleiss' kappa" worked example (14 raters, 10 subjects, 5 categories):
    # P-bar = 0.378, P-bar_e = 0.213, kappa = 0.210
    table = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0],
             [2, 2, 8, 1, 1], [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2],
             [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]
    assert fleiss_kappa(table) == pytest.approx(0.20993, abs=5e-5)
    assert all_agree_share(table) == pytest.approx(0.1)


def test_fleiss_perfect_and_undefined():
    assert fleiss_kappa([[3, 0], [0, 3], [3, 0]]) == pytest.approx(1.0)
    assert fleiss_kappa([[3, 0], [3, 0]]) is None  # one category only: undefined
    with pytest.raises(ValueError):
        fleiss_kappa([[3, 0], [1, 1]])


def test_summary_figures_and_leniency_by_hand():
    labels = ["SUPPORTED", "CONTRADICTED", "NOT_FOUND"]
    # human:  S S C C N N ; grader: S S S C S N
    ref = [0, 0, 1, 1, 2, 2]
    oth = [0, 0, 0, 1, 0, 2]
    s = agreement_summary(ref, oth, labels, lenient=(["CONTRADICTED", "NOT_FOUND"], "SUPPORTED"),
                          n_resamples=500, seed=1)
    assert s["n"] == 6
    assert s["confusion"]["counts"] == [[2, 0, 0], [1, 1, 0], [1, 0, 1]]
    assert s["accuracy"]["value"] == pytest.approx(4 / 6)
    assert s["per_label"]["SUPPORTED"]["precision"]["value"] == pytest.approx(0.5)
    assert s["per_label"]["SUPPORTED"]["recall"]["value"] == pytest.approx(1.0)
    assert s["per_label"]["CONTRADICTED"]["recall"]["value"] == pytest.approx(0.5)
    assert s["leniency"]["value"] == pytest.approx(0.5) and s["leniency"]["n"] == 4
    assert s["kappa"] == pytest.approx(cohen_kappa(ref, oth, 3))
    assert s["ci_low"] <= s["kappa"] <= s["ci_high"]
    again = agreement_summary(ref, oth, labels, n_resamples=500, seed=1)
    assert (again["ci_low"], again["ci_high"]) == (s["ci_low"], s["ci_high"])  # seeded


def test_perfect_agreement_interval_is_degenerate():
    s = agreement_summary([0, 1, 2, 0, 1, 2], [0, 1, 2, 0, 1, 2], ["YES", "PARTIAL", "NO"],
                          weighted=True, n_resamples=200)
    assert s["kappa"] == pytest.approx(1.0)
    assert s["weighted_kappa"]["value"] == pytest.approx(1.0)
    assert s["ci_high"] == pytest.approx(1.0)
