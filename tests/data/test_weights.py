"""Case weights and traffic shares: known answers, raking, errors, and a weighted run end to
end (metrics.json weighted means and effective sample size, records, validate)."""

import json
import math
import re
from types import SimpleNamespace

import pytest

from raglab.data.weights import effective_size, effective_weights
from raglab.errors import UserError
from tests.conftest import TINY_CASES, TINY_CORPUS, run_cli, write_jsonl


def case(cid, weight=1.0, **tags):
    return SimpleNamespace(id=cid, weight=weight, tags=tags)


def test_shares_of_one_key_by_hand():
    cases = [case("a", intent="billing"), case("b", intent="billing"),
             case("c", intent="billing"), case("d", intent="api")]
    w = effective_weights(cases, {"intent": {"billing": 0.4, "api": 0.6}})
    assert w is not None
    assert sum(w.values()) == pytest.approx(4.0)              # the total is kept
    assert w["a"] == pytest.approx(0.4 * 4 / 3) and w["d"] == pytest.approx(0.6 * 4)
    # shares are normalised: 2 and 3 are 0.4 and 0.6
    assert effective_weights(cases, {"intent": {"billing": 2, "api": 3}}) == pytest.approx(w)


def test_case_weights_alone_and_with_shares():
    cases = [case("a", 2.0, intent="x"), case("b", 1.0, intent="x"), case("c", 1.0, intent="y")]
    assert effective_weights(cases, {}) == {"a": 2.0, "b": 1.0, "c": 1.0}
    assert effective_weights([case("a"), case("b")], {}) is None     # unweighted
    w = effective_weights(cases, {"intent": {"x": 0.5, "y": 0.5}})
    assert w["a"] == pytest.approx(2 * w["b"])                # own weights kept within a value
    assert w["a"] + w["b"] == pytest.approx(w["c"])


def test_two_keys_are_raked_to_both_margins():
    cases = [case(f"c{i}", intent=("a" if i % 3 else "b"), region=("eu" if i % 2 else "us"))
             for i in range(30)]
    shares = {"intent": {"a": 0.5, "b": 0.5}, "region": {"eu": 0.3, "us": 0.7}}
    w = effective_weights(cases, shares)
    total = sum(w.values())
    for key, target in shares.items():
        for value, share in target.items():
            got = sum(w[c.id] for c in cases if c.tags[key] == value) / total
            assert got == pytest.approx(share, abs=1e-9)


@pytest.mark.parametrize("shares,message", [
    ({"intent": {"billing": 1.0}}, "tag value 'api' has no share"),
    ({"tier": {"gold": 1.0}}, "have no tag 'tier'"),
    ({"intent": {"billing": 0.0, "api": 0.0}}, "sum to 0"),
    ({"intent": {"billing": -1.0, "api": 2.0}}, "finite numbers >= 0"),
    ({"intent": {"billing": 0.5, "api": 0.5, "ghost": 0.2}}, "no case with weight"),
])
def test_bad_shares_are_one_line_errors(shares, message):
    cases = [case("a", intent="billing"), case("b", intent="api")]
    with pytest.raises(UserError) as e:
        effective_weights(cases, shares)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_effective_size():
    assert effective_size([1, 1, 1, 1]) == 4
    assert effective_size([3, 1]) == pytest.approx(16 / 10)


@pytest.mark.slow  # end to end (CLI runs): in the slow suite
def test_a_weighted_run_end_to_end(tmp_path):
    cases = [dict(c) for c in TINY_CASES]
    cases[0]["weight"] = 3                                   # t-1 counts three times
    corpus = write_jsonl(tmp_path / "corpus.jsonl", TINY_CORPUS)
    path = write_jsonl(tmp_path / "cases.jsonl", cases)
    args = [f"dataset.corpus={corpus}", f"dataset.cases={path}",
            "+dataset.weights.source.kb=0.5", "+dataset.weights.source.none=0.25",
            "+dataset.weights.source.policy=0.25"]
    proc = run_cli("validate", *args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "weighted: effective sample size" in proc.stdout
    proc = run_cli("run", *args, "tracking=none", "progress=off",
                   f"hydra.run.dir={tmp_path / 'run'}", f"cache_dir={tmp_path / 'cache'}",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    records = [json.loads(x) for x in (tmp_path / "run" / "records.jsonl").read_text()
               .splitlines()]
    w = {r["case_id"]: r["weight"] for r in records}
    # the weights total 3 + 1 + 1 + 1 = 6; source=kb (t-1 and t-2) gets half of it, in the
    # ratio of their own weights
    assert w["t-1"] == pytest.approx(3 * w["t-2"])
    assert w["t-1"] + w["t-2"] == pytest.approx(3.0) and w["t-3"] == pytest.approx(1.5)
    assert metrics["weighted"] is True
    assert metrics["n_eff"] == pytest.approx(effective_size(list(w.values())))
    name = "faithfulness"
    vals = [(r["metrics"][name], w[r["case_id"]]) for r in records
            if r["metrics"].get(name) is not None]
    want = sum(v * x for v, x in vals) / sum(x for _, x in vals)
    assert math.isclose(metrics["overall"][name], want, rel_tol=1e-12)
    report = (tmp_path / "run" / "report.md").read_text()
    assert "- weighted: every mean weighs the cases (effective sample size" in report


def _weighted_set(tmp_path, weight):
    cases = [dict(c) for c in TINY_CASES]
    cases[0]["weight"] = cases[1]["weight"] = weight
    corpus = write_jsonl(tmp_path / "corpus.jsonl", TINY_CORPUS)
    path = write_jsonl(tmp_path / "cases.jsonl", cases)
    return [f"dataset.corpus={corpus}", f"dataset.cases={path}", "dataset.labels=null"]


SHARES = ["+dataset.weights.source.kb=0.5", "+dataset.weights.source.none=0.25",
          "+dataset.weights.source.policy=0.25"]


def _one_line(p, *parts: str) -> None:
    assert p.returncode == 2, (p.stdout[-2000:], p.stderr)
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr, p.stderr
    assert all(x in p.stderr for x in parts), p.stderr


def test_an_overflowing_weight_is_refused_at_validation(tmp_path):
    """A weight of 1e308 used to pass validation and end every run in "unexpected error
    ValueError: Out of range float"; with shares beside it, the total overflowed and the
    run was refused as "every case has weight 0"."""
    args = _weighted_set(tmp_path, 1e308)
    where = ("cases.jsonl:1 case t-1: field 'weight'", "less than or equal to 1000000000000")
    _one_line(run_cli("validate", *args, cwd=tmp_path), *where)
    p = run_cli("validate", *args, *SHARES, cwd=tmp_path)
    _one_line(p, *where)
    assert "weight 0" not in p.stderr
    _one_line(run_cli("run", *args, "tracking=none", "progress=off",
                      f"hydra.run.dir={tmp_path / 'run'}", f"cache_dir={tmp_path / 'c'}",
                      cwd=tmp_path), *where)


def test_the_largest_weights_and_shares_give_finite_figures(tmp_path):
    args = _weighted_set(tmp_path, 1e12)
    p = run_cli("validate", *args, *[s.replace("=0.5", "=1e12") for s in SHARES],
                cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    n_eff = float(re.search(r"effective sample size ([\d.]+) of 4", p.stdout).group(1))
    assert 1 <= n_eff <= 4
    tiny = _weighted_set(tmp_path, 1e-300)  # no underflow to 0 in the effective size
    p = run_cli("validate", *tiny, cwd=tmp_path)
    assert p.returncode == 0 and "effective sample size 2.0 of 4" in p.stdout, p.stdout


def test_an_overflowing_share_is_refused_as_config(tmp_path):
    """Shares of 1e308 used to end in ZeroDivisionError."""
    args = _weighted_set(tmp_path, 1.0)
    big = [s.split("=")[0] + "=1e308" for s in SHARES]
    _one_line(run_cli("validate", *args, *big, cwd=tmp_path),
              "dataset.weights.source.kb", "less than or equal to 1000000000000")
    cases = [case("a", intent="x"), case("b", intent="y")]
    with pytest.raises(UserError) as e:
        effective_weights(cases, {"intent": {"x": 1e308, "y": 1e308}})
    assert "at most 1e+12" in str(e.value)
    with pytest.raises(UserError) as e:
        effective_weights([case("a", 1e308, intent="x")], {})
    assert "case a: weight 1e+308" in str(e.value)


def test_a_set_where_every_case_weighs_0_names_its_file(tmp_path):
    """'every case has weight 0' named no file; it names the cases file."""
    cases = [dict(c, weight=0) for c in TINY_CASES]
    corpus = write_jsonl(tmp_path / "corpus.jsonl", TINY_CORPUS)
    path = write_jsonl(tmp_path / "cases.jsonl", cases)
    p = run_cli("validate", f"dataset.corpus={corpus}", f"dataset.cases={path}",
                "dataset.labels=null", cwd=tmp_path)
    _one_line(p, f"{path}: every case has weight 0: nothing would be measured")
    with pytest.raises(UserError, match=r"^c\.jsonl case a: weight inf: a weight is"):
        effective_weights([SimpleNamespace(id="a", weight=math.inf)], {}, "c.jsonl")
