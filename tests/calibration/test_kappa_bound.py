"""The one-sided 95% lower confidence bound of kappa that min_kappa compares: a known
answer (a large sample, where the bootstrap bound meets the normal one), and the gate
check reading the bound, not the point estimate (the issue's kappa 0.091 [0.045, 0.141]
against a bar of 0.09)."""

import math

import pytest

from raglab.calibration.summary import summarise
from raglab.compare.gates import GateSet
from raglab.compare.kappa import calibration_checks


class _Label:
    def __init__(self, kind, human):
        self.case_id, self.kind, self.item, self.label = "c", kind, "i", human


class _Line:
    def __init__(self, kind, human, line):
        self.label, self.line = _Label(kind, human), line


def _table(n_agree_yes, n_agree_no, n_yes_no, n_no_yes):
    """Claim labels (SUPPORTED / NOT_FOUND) and the grader's, from a 2x2 table."""
    pairs = ([("SUPPORTED", "SUPPORTED")] * n_agree_yes + [("NOT_FOUND", "NOT_FOUND")] *
             n_agree_no + [("SUPPORTED", "NOT_FOUND")] * n_yes_no +
             [("NOT_FOUND", "SUPPORTED")] * n_no_yes)
    labels = [_Line("claim", h, i + 1) for i, (h, _) in enumerate(pairs)]
    return labels, [[g] for _, g in pairs]


def test_the_lower_bound_of_a_large_sample_meets_the_normal_one():
    # 1000 items: 400 + 400 agree, 100 + 100 disagree: po 0.8, pe 0.5, kappa 0.6
    labels, judged = _table(400, 400, 100, 100)
    s = summarise(labels, judged, repeats=1, independent=1, seed=7, n_resamples=4000)["claims"]
    assert s["kappa"] == pytest.approx(0.6)
    # Cohen's large-sample standard error sqrt(po (1 - po) / (n (1 - pe)^2)) = 0.0253
    se = math.sqrt(0.8 * 0.2 / (1000 * 0.5 ** 2))
    assert s["kappa_lcb"] == pytest.approx(0.6 - 1.6449 * se, abs=0.006)
    assert s["ci_low"] < s["kappa_lcb"] < s["kappa"]  # one-sided 95% sits inside two-sided


def _entry(kappa, lcb, match="same"):
    return {"candidate": {"version": "v1", "calibrated": True, "kappa": kappa,
                          "ci_low": 0.045, "ci_high": 0.141, "kappa_lcb": lcb, "n": 157,
                          "labels_kind": "claim", "labels_sha256": "ab" * 32,
                          "dataset_match": match,
                          "dataset": {"name": "demo", "n_cases": 228,
                                      "cases_sha256": "cd" * 32}}}


def _check(entry, **extra):
    gates = GateSet.model_validate({"gates": [{"metric": "faithfulness", "rule":
                                               "non_inferior", "margin": 0.05}],
                                    "min_kappa": {"faithfulness": 0.09}, **extra})
    applied = [{"metric": "faithfulness", "status": "pass"}]
    (check,) = calibration_checks(gates, applied, {"faithfulness": _entry(*entry)})
    return check


def test_min_kappa_reads_the_one_sided_lower_bound_not_the_estimate():
    check = _check((0.091, 0.052))
    assert check["status"] == "fail"
    assert "one-sided 95% lower bound 0.052 < 0.09" in check["reason"]
    assert check["requirement"] == "kappa's one-sided 95% lower confidence bound >= 0.09"
    assert _check((0.2, 0.12))["status"] == "pass"


def test_a_calibration_of_another_dataset_is_uncalibrated_unless_any():
    other = _check((0.5, 0.4, "other"))
    assert other["status"] == "fail" and "treated as uncalibrated" in other["reason"]
    assert "dataset demo (228 cases, sha256 cdcdcdcdcdcd)" in other["reason"]
    assert _check((0.5, 0.4, "unknown"))["status"] == "fail"
    assert _check((0.5, 0.4, "other"), calibration_from="any")["status"] == "pass"
