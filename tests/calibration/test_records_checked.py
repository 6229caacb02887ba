"""Calibration records are checked as they are read: a hand-edited record (a kappa of 7.5,
NaN, a string or a list; a ``ci_low`` that is not a number; ``claims`` as a list;
``versions`` as a string) is one line naming the file and the line, exit 2, in ``raglab
decide`` and ``raglab compare`` (it used to end in a traceback, and a kappa of 7.5 passed
``min_kappa``: GO)."""

from __future__ import annotations

import json

import pytest

from raglab.calibration.records import read_records, records_path
from raglab.errors import UserError
from tests.conftest import TINY_CASES, TINY_CORPUS, run_cli, write_jsonl


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("cal-records")
    corpus = write_jsonl(root / "corpus.jsonl", TINY_CORPUS)
    cases = write_jsonl(root / "cases.jsonl", TINY_CASES)
    for name in ("base", "cand"):
        p = run_cli("run", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                    "dataset.labels=null", "tracking=none", "progress=off",
                    f"hydra.run.dir={root / name}", f"cache_dir={root / 'cache'}", cwd=root)
        assert p.returncode == 0, p.stderr
    versions = json.loads((root / "cand" / "metrics.json").read_text())["metric_versions"]
    gates = root / "trust.yaml"
    # a margin 3-4 cases can meet (docs/statistics.md: +-0.73 at n = 3); the hand-written
    # records name no dataset, so the gate set accepts a calibration from any
    gates.write_text("gates:\n"
                     "  - {metric: faithfulness, rule: non_inferior, margin: 0.8}\n"
                     "  - {metric: acl_leak_rate, rule: bound, max: 0}\n"
                     "min_kappa: {faithfulness: 0.3}\n"
                     "calibration_from: any\n"
                     "min_n: 1\n")
    return {"root": root, "versions": versions, "gates": gates}


def _record(versions, **claims):
    return {"created": "2026-12-01T09:00:00+00:00", "grader": "heuristic",
            "versions": versions, "repeats": 1,
            "labels": {"path": "labels.jsonl", "sha256": "ab" * 32, "n": 10},
            "claims": {"n": 6, "kappa": 0.9, "ci_low": 0.8, "ci_high": 0.95,
                       "kappa_lcb": 0.82, "leniency": 0.1, **claims},
            "nuggets": {"n": 4, "kappa": 0.5, "ci_low": 0.3, "ci_high": 0.7, "leniency": 0.0},
            "self_consistency": {}, "run_dir": "x", "mlflow_run_id": None}


def _write(runs, *records: dict | str) -> None:
    path = records_path(runs["root"] / "cache")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n"
                            for r in records))


def _decide(runs, tmp_path):
    root = runs["root"]
    return run_cli("decide", str(root / "base"), str(root / "cand"), f"gates={runs['gates']}",
                   "--study", str(tmp_path / "study"), cwd=root)


def _one_line(p, where: str, what: str) -> None:
    assert p.returncode == 2, (p.stdout[-2000:], p.stderr)
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr, p.stderr
    assert f"records.jsonl:{where}: calibration record: " in p.stderr and what in p.stderr, \
        p.stderr


@pytest.mark.slow
def test_a_good_record_gates_and_a_kappa_of_7_5_is_refused(runs, tmp_path):
    _write(runs, _record(runs["versions"]))
    p = _decide(runs, tmp_path)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr
    assert f"{'PASS':12}  faithfulness judge kappa" in p.stdout
    _write(runs, _record(runs["versions"]), _record(runs["versions"], kappa=7.5))
    p = _decide(runs, tmp_path)
    _one_line(p, "2", "field 'claims.kappa': Input should be less than or equal to 1")
    p = run_cli("compare", str(runs["root"] / "base"), str(runs["root"] / "cand"),
                "--out", str(tmp_path / "cmp"), cwd=runs["root"])
    _one_line(p, "2", "claims.kappa")


BAD = [
    ({"kappa": "0.9"}, "claims.kappa"),
    ({"kappa": float("nan")}, "claims.kappa"),
    ({"kappa": [0.5]}, "claims.kappa"),
    ({"ci_low": "x"}, "claims.ci_low"),
]


@pytest.mark.slow
@pytest.mark.parametrize("claims, what", BAD, ids=lambda x: str(x)[:20])
def test_hand_edited_records_are_one_line_in_decide(runs, tmp_path, claims, what):
    _write(runs, json.dumps(_record(runs["versions"], **claims)))  # NaN written as NaN
    _one_line(_decide(runs, tmp_path), "1", what)


@pytest.mark.slow
def test_claims_as_a_list_and_versions_as_a_string_are_one_line(runs, tmp_path):
    rec = _record(runs["versions"])
    _write(runs, {**rec, "claims": [rec["claims"]]})
    _one_line(_decide(runs, tmp_path), "1", "field 'claims'")
    _write(runs, rec, {**rec, "versions": "f1"})
    _one_line(_decide(runs, tmp_path), "2", "field 'versions'")


@pytest.mark.parametrize("change, what", [
    *BAD,
    ({"kappa": 7.5}, "claims.kappa"),
    ({"kappa": -1.5}, "claims.kappa"),
    ({"ci_high": float("inf")}, "claims.ci_high"),
    ({"n": 2.5}, "claims.n"),
], ids=lambda x: str(x)[:20])
def test_read_records_checks_every_field(tmp_path, change, what):
    path = records_path(tmp_path)
    path.parent.mkdir(parents=True)
    good = _record({"faithfulness": "f1"})
    path.write_text(json.dumps(good) + "\n" + json.dumps(_record({"faithfulness": "f1"},
                                                                 **change)) + "\n")
    with pytest.raises(UserError) as e:
        read_records(tmp_path)
    assert str(e.value).startswith(f"{path}:2: calibration record: field '{what}'")
    path.write_text(json.dumps(good) + "\n" + '{"created": "torn')  # a kill mid-append
    assert [r["claims"]["kappa"] for r in read_records(tmp_path)] == [0.9]


@pytest.mark.slow
def test_a_run_with_a_bad_record_finishes_then_says_so_in_one_line(tmp_path):
    corpus = write_jsonl(tmp_path / "corpus.jsonl", TINY_CORPUS)
    cases = write_jsonl(tmp_path / "cases.jsonl", TINY_CASES)
    path = records_path(tmp_path / "cache")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({**_record({}), "versions": "f1"}) + "\n")
    p = run_cli("run", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                "dataset.labels=null", "dataset.name=tiny", "tracking=none", "progress=off",
                f"hydra.run.dir={tmp_path / 'run'}", f"cache_dir={tmp_path / 'cache'}",
                cwd=tmp_path)
    _one_line(p, "1", "field 'versions'")
    assert "(the run finished: " in p.stderr and "calibration records unreadable" in p.stdout
    assert (tmp_path / "run" / "metrics.json").is_file()
