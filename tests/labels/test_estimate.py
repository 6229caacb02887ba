"""The ppi section of metrics.json: raglab.stats.ppi's figures on the run's own values,
stratified weights for a stratified sample, slices only with enough labels, and why an
estimate is missing."""

from __future__ import annotations

import json

import pytest

from raglab.labels.estimate import MIN_SLICE_LABELS, ppi_section
from raglab.labels.sample import draw, inclusion_probabilities
from raglab.labels.store import StoredLabel, answer_sha256, store_labels, write_sample
from raglab.stats.ppi import ppi_mean, ppi_stratified
from tests.labels.runs import VERSIONS, make_run, record


def _run(tmp_path, n_cases=80):
    recs = []
    for i in range(n_cases):
        intent = "billing" if i < n_cases * 3 // 4 else "exports"
        judge = 1.0 if i % 5 else 0.0
        recs.append(record(f"c{i:03d}", f"answer {i}", faith=judge, intent=intent))
    return make_run(tmp_path / "run", recs), {r["case_id"]: r for r in recs}


def _label_all(run, recs, design, human):
    store_labels(run, [StoredLabel(c, "faithfulness", human(c), answer_sha256(recs[c]["output"]),
                                   VERSIONS["faithfulness"], "t", "test")
                       for c in design.sampled_ids()])


def _human(cid):  # people reject more than the judge does
    return 0.0 if int(cid[1:]) % 3 == 0 or int(cid[1:]) % 5 == 0 else 1.0


def test_a_simple_random_sample(tmp_path):
    run, recs = _run(tmp_path)
    design = draw({c: r["tags"] for c, r in recs.items()}, 30, seed=2, by=None)
    write_sample(run, design, {"inclusion_probability": inclusion_probabilities(design)})
    _label_all(run, recs, design, _human)
    section = ppi_section(run)
    entry = section["metrics"]["faithfulness"]
    ids = sorted(design.sampled_ids())
    judge = {c: recs[c]["metrics"]["faithfulness"] for c in recs}
    want = ppi_mean([_human(c) for c in ids], [judge[c] for c in ids], list(judge.values()),
                    bounds=(0.0, 1.0))
    got = entry["overall"]
    assert got["estimate"] == pytest.approx(want.estimate, abs=1e-12)
    assert got["ci_low"] == pytest.approx(want.ci_low, abs=1e-12)
    assert got["n_effective"] == pytest.approx(want.n_effective)
    assert got["stratified"] is False and got["n_all"] == 80
    assert entry["labels"] == {"usable": 30, "stale": 0, "missing": 0}
    assert section["sample"]["inclusion_probability"] == {"all": 30 / 80}
    # slices: only those holding enough labels; each the estimate over its own cases
    billing = [c for c in ids if recs[c]["tags"]["intent"] == "billing"]
    assert len(billing) >= MIN_SLICE_LABELS
    slice_want = ppi_mean([_human(c) for c in billing], [judge[c] for c in billing],
                          [judge[c] for c in recs if recs[c]["tags"]["intent"] == "billing"])
    assert entry["slices"]["intent"]["billing"]["estimate"] == \
        pytest.approx(slice_want.estimate, abs=1e-12)
    exports = [c for c in ids if recs[c]["tags"]["intent"] == "exports"]
    assert ("exports" in entry["slices"]["intent"]) == (len(exports) >= MIN_SLICE_LABELS)


def test_a_stratified_sample_is_weighted_by_its_strata(tmp_path):
    run, recs = _run(tmp_path)
    design = draw({c: r["tags"] for c, r in recs.items()}, 40, seed=2, by="intent")
    assert {h: len(v) for h, v in design.sampled.items()} == {"billing": 30, "exports": 10}
    write_sample(run, design, {})
    _label_all(run, recs, design, _human)
    got = ppi_section(run)["metrics"]["faithfulness"]["overall"]
    judge = {c: recs[c]["metrics"]["faithfulness"] for c in recs}
    strata = {}
    for h, ids in design.sampled.items():
        members = [c for c in recs if recs[c]["tags"]["intent"] == h]
        strata[h] = ([_human(c) for c in ids], [judge[c] for c in ids],
                     [judge[c] for c in members])
    want = ppi_stratified(strata, {"billing": 60, "exports": 20})
    assert got["stratified"] is True
    assert got["estimate"] == pytest.approx(want.estimate, abs=1e-12)
    assert (got["ci_low"], got["ci_high"]) == pytest.approx((want.ci_low, want.ci_high))


def test_too_few_labels_say_why(tmp_path):
    run, recs = _run(tmp_path)
    design = draw({c: r["tags"] for c, r in recs.items()}, 30, seed=2, by=None)
    write_sample(run, design, {})
    first = sorted(design.sampled_ids())[:1]
    store_labels(run, [StoredLabel(c, "faithfulness", 1.0, answer_sha256(recs[c]["output"]),
                                   VERSIONS["faithfulness"], "t", "test") for c in first])
    entry = ppi_section(run)["metrics"]["faithfulness"]
    assert entry["overall"] is None and "1 usable label(s)" in entry["why"]
    assert entry["labels"] == {"usable": 1, "stale": 0, "missing": 29}
    assert entry["slices"] == {}


def test_no_estimate_once_the_runs_cases_changed(tmp_path):
    run, recs = _run(tmp_path)
    design = draw({c: r["tags"] for c, r in recs.items()}, 30, seed=2, by=None)
    write_sample(run, design, {})
    _label_all(run, recs, design, _human)
    extra = record("z-new", "a case the sample could not draw")
    with open(run / "records.jsonl", "a") as fh:
        fh.write(json.dumps(extra) + "\n")
    entry = ppi_section(run)["metrics"]["faithfulness"]
    assert entry["overall"] is None and "cases changed" in entry["why"]


def test_the_ppi_figures_are_mlflow_metrics_of_the_run(tmp_path):
    """What ``raglab label`` logs to the run's MLflow run, and what ``raglab log`` of a
    labelled run directory logs with its other metrics."""
    from raglab.tracking.keys import metrics_from_summary

    run, recs = _run(tmp_path)
    design = draw({c: r["tags"] for c, r in recs.items()}, 30, seed=2, by=None)
    write_sample(run, design, {})
    _label_all(run, recs, design, _human)
    section = ppi_section(run)
    logged = metrics_from_summary({"overall": {"faithfulness": 0.8}, "ppi": section})
    overall = section["metrics"]["faithfulness"]["overall"]
    assert logged["ppi.faithfulness.estimate"] == overall["estimate"]
    assert logged["ppi.faithfulness.n_labelled"] == 30
    assert logged["slice/intent/billing/ppi.faithfulness.ci_low"] == \
        section["metrics"]["faithfulness"]["slices"]["intent"]["billing"]["ci_low"]
    assert logged["faithfulness"] == 0.8
