"""The label store of a run: which labels are usable, stale or missing, and one line naming
file, line and case id for a bad labels file."""

from __future__ import annotations

import json

import pytest

from raglab.errors import UserError
from raglab.labels.store import (
    SampleDesign,
    StoredLabel,
    answer_sha256,
    case_set_sha256,
    label_value,
    labelled_spec,
    labels_dir,
    read_stored,
    store_labels,
    usable_labels,
    write_sample,
)
from tests.labels.runs import VERSIONS, make_run, record


def _run(tmp_path, answers=None):
    answers = answers or {f"c{i}": f"answer {i}" for i in range(6)}
    recs = [record(cid, a, intent="billing" if i % 2 else "exports")
            for i, (cid, a) in enumerate(answers.items())]
    recs[5]["metrics"]["faithfulness"] = None  # an abstention: faithfulness does not apply
    run = make_run(tmp_path / "run", recs)
    ids = sorted(answers)
    write_sample(run, SampleDesign(7, None, {"all": 6}, {"all": ["c0", "c1", "c2", "c3", "c5"]},
                                   case_set_sha256(ids)), {"n": 5})
    return run, {r["case_id"]: answer_sha256(r["output"]) for r in recs}


def _label(cid, sha, value=1.0, metric="faithfulness", version=VERSIONS["faithfulness"]):
    return StoredLabel(cid, metric, value, sha, version, "2026-01-01T00:00:00+00:00", "test")


def test_usable_stale_and_missing(tmp_path):
    run, sha = _run(tmp_path)
    assert usable_labels(run, "faithfulness") is None  # no labels yet
    store_labels(run, [
        _label("c0", sha["c0"], 1.0),
        _label("c1", sha["c1"], 0.0),
        _label("c2", "0" * 64, 1.0),  # made for another answer: stale
        _label("c3", sha["c3"], 0.5, version="0" * 12),  # another judge version: stale
        _label("c4", sha["c4"], 1.0),  # not in the sample: never used
    ])
    got = usable_labels(run, "faithfulness")
    assert got is not None
    assert got.values == {"c0": 1.0, "c1": 0.0}
    assert got.metric_version == VERSIONS["faithfulness"]
    assert (got.stale, got.missing) == (2, 0)  # c5 is sampled but faithfulness is null there
    assert set(got.stratum_of) == {f"c{i}" for i in range(6)}
    assert set(got.stratum_of.values()) == {"all"}
    assert got.design.seed == 7 and got.design.population == {"all": 6}
    assert usable_labels(run, "correctness") is None  # labels of another metric only


def test_a_changed_answer_makes_the_label_stale(tmp_path):
    run, sha = _run(tmp_path)
    store_labels(run, [_label("c0", sha["c0"]), _label("c1", sha["c1"])])
    recs = [json.loads(x) for x in (run / "records.jsonl").read_text().splitlines()]
    recs[0]["output"]["answer"] = "a different answer"
    (run / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    got = usable_labels(run, "faithfulness")
    assert got is not None and got.values == {"c1": 1.0}
    assert (got.stale, got.missing) == (1, 2)


def test_a_new_label_of_the_same_key_replaces_the_old(tmp_path):
    run, sha = _run(tmp_path)
    assert store_labels(run, [_label("c0", sha["c0"], 1.0)]) == (1, 0)
    assert store_labels(run, [_label("c0", sha["c0"], 0.0)]) == (0, 1)
    assert [lab.label for lab in read_stored(run)] == [0.0]
    assert usable_labels(run, "faithfulness").values == {"c0": 0.0}


@pytest.mark.parametrize("line,message", [
    ({"case_id": "c1", "metric": "faithfulness", "label": "maybe"}, "label 'maybe'"),
    ({"case_id": "c1", "metric": "final.mrr", "label": 1}, "not judged by a grader"),
    ({"case_id": "c1", "metric": "faithfulness", "label": 1.5}, "outside [0, 1]"),
    ({"case_id": "c1", "metric": "faithfulness", "label": -int("9" * 400)},
     "label (a negative number of 400 digits) is outside [0, 1]"),
    ({"case_id": "c1", "metric": "all_vital_present", "label": "partial"}, "pass/fail"),
    ({"case_id": "c1", "metric": "faithfulness", "label": 1, "answer_sha256": "x",
      "metric_version": "v"}, "answer_sha256 is not a sha256"),
])
def test_a_bad_labels_file_names_file_line_and_case(tmp_path, line, message):
    run, sha = _run(tmp_path)
    good = _label("c0", sha["c0"]).to_json()
    bad = {**{k: good[k] for k in ("answer_sha256", "metric_version")}, **line}
    path = labels_dir(run) / "labels.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(UserError) as e:
        usable_labels(run, "faithfulness")
    text = str(e.value)
    assert "\n" not in text
    assert text.startswith(f"{path}:2 case c1: ")
    assert message in text


def test_labels_without_a_sample_are_refused(tmp_path):
    run, sha = _run(tmp_path)
    store_labels(run, [_label("c0", sha["c0"])])
    (labels_dir(run) / "sample.json").unlink()
    with pytest.raises(UserError, match="no sample design"):
        usable_labels(run, "faithfulness")


def test_label_words_and_numbers():
    share, binary = labelled_spec("faithfulness"), labelled_spec("all_vital_present")
    assert [label_value(x, share) for x in ("yes", "Partial", "NO", 1, 0, "0.25", None, "")] \
        == [1.0, 0.5, 0.0, 1.0, 0.0, 0.25, None, None]
    assert label_value(True, binary) == 1.0
    with pytest.raises(ValueError):
        label_value(0.5, binary)
    with pytest.raises(UserError):
        labelled_spec("latency_ms.total")


def test_the_answer_hash_covers_answer_and_context():
    out = {"answer": "A", "context": [{"text": "p1"}]}
    assert answer_sha256(out) == answer_sha256(dict(out))
    assert answer_sha256({**out, "answer": "B"}) != answer_sha256(out)
    assert answer_sha256({**out, "context": [{"text": "p2"}]}) != answer_sha256(out)
    assert answer_sha256({"answer": None}) is None and answer_sha256(None) is None
