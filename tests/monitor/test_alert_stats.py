"""The contradiction alert knows its sample: known answers (fixed counts -> alert, no alert,
untested) and simulations of binomial lines (false alarms at a true rate below the
threshold, power well above it). Pure functions: no grader, no subprocess."""

from __future__ import annotations

import numpy as np
import pytest

from raglab.monitor.windows import contradiction_check, find_alerts, real_alerts
from raglab.stats.rates import (
    can_reject_vs_baseline,
    lower_bound,
    min_units_above,
    rate_above,
    rate_above_baseline,
)

THR, CONF = 0.05, 0.95


def _window(k: int, n: int, start: str = "2026-11-02T00:00:00+00:00") -> dict:
    """A window_table row with ``n`` judged lines, ``k`` of them contradicted (one claim each)."""
    return {"start": start, "end": start, "contradicted_lines": k,
            "contradicted_claim_rate.n": n, "contradicted_claim_rate": k / n if n else None,
            "_scores": []}


def _check(k, n, baseline=None, min_judged=5, thr=THR, conf=CONF):
    return contradiction_check(_window(k, n), baseline, max_contradicted=thr,
                               confidence=conf, min_judged=min_judged)


# ---- known answers ----------------------------------------------------------------------

def test_exact_lower_bound_known_values():
    # Clopper-Pearson one-sided 95% lower bounds (beta quantiles)
    assert lower_bound(3, 10, CONF) == pytest.approx(0.08726, abs=1e-5)
    assert lower_bound(2, 20, CONF) == pytest.approx(0.01807, abs=1e-5)
    assert lower_bound(0, 10, CONF) == 0.0
    assert lower_bound(5, 5, CONF) == pytest.approx(0.05 ** (1 / 5))
    t = rate_above(3, 10, THR, CONF)
    assert t.reject and t.p_value == pytest.approx(0.011504, abs=1e-6)


def test_small_window_well_above_the_threshold_alerts():
    # 3 of 10 judged lines: today's code skipped it (10 < min_lines 20) and said nothing
    a = _check(3, 10)
    assert a is not None and a["status"] == "alert" and a["kind"] == "contradicted_claim_rate"
    assert a["contradicted"] == 3 and a["n"] == 10 and a["rate"] == 0.3
    assert a["ci_low"] == pytest.approx(0.0873, abs=1e-4) and a["unit"] == "judged line"
    assert "3 of 10 judged lines" in a["message"] and "lower bound 0.087 > 0.05" in a["message"]


def test_rate_above_threshold_by_noise_does_not_alert():
    # 2 of 20 = 0.10 > 0.05: today's bare threshold alerted; the lower bound is 0.018
    assert _check(2, 20) is None
    assert _check(4, 40) is None  # 0.10 again, bound 0.035
    assert _check(6, 40) is not None  # bound 0.057


def test_too_few_judged_lines_is_untested_with_reason_and_count():
    u = _check(2, 3)
    assert u["status"] == "untested" and u["kind"] == "untested"
    assert u["alert"] == "contradicted_claim_rate" and u["n"] == 3
    assert "3 judged line(s) < 5 (monitor.min_judged)" in u["reason"]
    # min_judged 1: one line cannot alert at 95% (its best p-value is 0.05 itself)
    assert min_units_above(THR, CONF) == 2 and min_units_above(0.5, 0.99) == 7
    u = _check(1, 1, min_judged=1)
    assert u["status"] == "untested" and "needs at least 2" in u["reason"]
    assert _check(2, 2, min_judged=1)["status"] == "alert"
    assert _check(0, 0)["status"] == "untested"  # no judged line at all
    assert _check(1, 1, thr=1.0, min_judged=1)["status"] == "untested"


def test_against_the_baseline_fisher_exact():
    t = rate_above_baseline(8, 20, 2, 100, CONF)
    assert t.reject and t.p_value == pytest.approx(5.5186e-06, rel=1e-3)
    a = _check(8, 20, baseline=(2, 100))
    assert a["status"] == "alert" and a["threshold"] is None
    assert a["baseline_rate"] == 0.02 and "Fisher exact" in a["test"]
    # above the threshold, but not above a baseline that runs at that rate already
    assert _check(2, 20, baseline=(10, 100)) is None
    assert not can_reject_vs_baseline(6, 0, CONF)
    u = _check(6, 6, baseline=(0, 0))
    assert u["status"] == "untested" and "baseline's 0" in u["reason"]


def test_find_alerts_lists_untested_drift_windows_and_real_alerts_filters():
    ws = [_window(3, 10, "2026-11-02T00:00:00+00:00"), _window(1, 2, "2026-11-03T00:00:00+00:00")]
    ws[0]["_scores"] = [1.0] * 30
    ws[1]["_scores"] = [1.0] * 4
    out = find_alerts(ws, [1.0] * 50, max_contradicted=THR, drift_p=0.01, drift_min_effect=0.2,
                      min_lines=20, confidence=CONF, min_judged=5)
    assert [(a["status"], a.get("alert", a["kind"])) for a in out] == [
        ("alert", "contradicted_claim_rate"), ("untested", "contradicted_claim_rate"),
        ("untested", "retrieval_score_drift")]
    assert real_alerts(out) == out[:1]
    assert ws[0]["contradiction.status"] == "alert" and ws[1]["contradiction.status"] == "untested"
    assert real_alerts([{"kind": "contradicted_claim_rate"}])  # old files: every entry an alert


# ---- simulations: binomial lines ------------------------------------------------------------

def _alert_share(rng, p, n_lines, windows, baseline=None) -> float:
    """Share of ``windows`` simulated windows that alert; judged lines per window drawn by
    ``n_lines(rng)``, each line contradicted with probability ``p``."""
    fired = 0
    for _ in range(windows):
        n = int(n_lines(rng))
        k = int(rng.binomial(n, p))
        base = None
        if baseline is not None:
            bn, bp = baseline
            base = (int(rng.binomial(bn, bp)), bn)
        a = _check(k, n, baseline=base, min_judged=1)
        fired += a is not None and a["status"] == "alert"
    return fired / windows


def _issue_defaults(rng):  # 200 lines a day, 5% judged
    return rng.binomial(200, 0.05)


def test_exact_size_never_exceeds_the_level():
    # not simulated: the exact false-alarm probability at a true rate equal to the threshold
    from scipy.stats import binom

    for n in range(2, 201):
        k = next(k for k in range(n + 1) if rate_above(k, n, THR, CONF).reject)
        assert binom.sf(k - 1, n, THR) < 1 - CONF, n


def test_simulated_false_alarms_below_the_threshold_and_power_above_it():
    rng = np.random.default_rng(20261202)
    # the issue's case: true rate 0.02, threshold 0.05, default sampling (~10 judged lines)
    assert _alert_share(rng, 0.02, _issue_defaults, 1400) <= 0.01
    for n in (10, 40, 100):
        assert _alert_share(rng, 0.04, lambda r, n=n: n, 600) <= 0.05
    # power: 0.25 with 40 judged lines alerts in most windows (exact: 98.4%)
    assert _alert_share(rng, 0.25, lambda r: 40, 400) >= 0.95
    # against a baseline at the same rate: no more than 5%; well above it: most windows
    assert _alert_share(rng, 0.05, lambda r: 40, 600, baseline=(200, 0.05)) <= 0.05
    assert _alert_share(rng, 0.25, lambda r: 40, 300, baseline=(200, 0.05)) >= 0.9


@pytest.mark.slow
def test_simulated_false_alarms_heavy():
    rng = np.random.default_rng(7)
    for p in (0.02, 0.04, 0.05):
        for n in (5, 10, 20, 40, 100, 200):
            share = _alert_share(rng, p, lambda r, n=n: n, 5000)
            assert share <= 0.05 + 3 * (0.05 * 0.95 / 5000) ** 0.5, (p, n, share)
    assert _alert_share(rng, 0.02, _issue_defaults, 20000) <= 0.01
    for bn in (50, 200, 1000):
        assert _alert_share(rng, 0.05, lambda r: 40, 4000, baseline=(bn, 0.05)) <= 0.05
    assert _alert_share(rng, 0.25, lambda r: 40, 4000) >= 0.95
