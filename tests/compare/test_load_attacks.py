"""``raglab compare`` on records and metrics a user (or an attacker) edited: each gives one
line naming the file, the line and the case (exit 2), never a traceback; and what a
comparison keeps of each record is a light row, the answers of flipped cases read again."""

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import TINY_CASES, TINY_CORPUS, run_cli, write_jsonl


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("attacks")
    write_jsonl(d / "corpus.jsonl", TINY_CORPUS)
    write_jsonl(d / "cases.jsonl", TINY_CASES)
    res = run_cli("run", "tracking=none", "hydra.run.dir=base",
                  f"dataset.corpus={d / 'corpus.jsonl'}", f"dataset.cases={d / 'cases.jsonl'}",
                  cwd=d)
    assert res.returncode == 0, res.stderr[-2000:]
    return d / "base"


def _copy(run: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "cand"
    shutil.copytree(run, dest)
    return dest


def _lines(run: Path) -> list[str]:
    return (run / "records.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)


def _write(run: Path, lines: list[str]) -> None:
    (run / "records.jsonl").write_text("".join(lines), encoding="utf-8")


def _compare_fails(run: Path, cand: Path, *needles: str) -> str:
    res = run_cli("compare", str(run), str(cand), "--out", str(cand.parent / "cmp"),
                  cwd=cand.parent)
    assert res.returncode == 2, (res.returncode, res.stderr[-2000:])
    err = res.stderr.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    for needle in needles:
        assert needle in err, err
    return err


def _edit_second(run: Path, edit) -> str:
    lines = _lines(run)
    obj = json.loads(lines[1])
    lines[1] = edit(obj)
    _write(run, lines)
    return obj["case_id"]


def test_a_metric_that_is_a_string_names_file_line_and_case(run, tmp_path):
    cand = _copy(run, tmp_path)

    def edit(obj):
        name = next(iter(obj["metrics"]))
        obj["metrics"][name] = "0.5"
        return json.dumps(obj) + "\n"

    cid = _edit_second(cand, edit)
    _compare_fails(run, cand, "records.jsonl:2", cid, "expected a number or null")


def test_nan_in_records_names_file_line_and_case(run, tmp_path):
    cand = _copy(run, tmp_path)

    def edit(obj):
        name = next(iter(obj["metrics"]))
        obj["metrics"][name] = float("nan")
        return json.dumps(obj) + "\n"  # json writes NaN

    cid = _edit_second(cand, edit)
    _compare_fails(run, cand, "records.jsonl:2", cid, "NaN")


def test_a_line_nested_100000_deep_names_file_and_line(run, tmp_path):
    cand = _copy(run, tmp_path)
    lines = _lines(cand)
    lines[1] = '{"case_id": "x", "deep": ' + "[" * 100_000 + "]" * 100_000 + "}\n"
    _write(cand, lines)
    _compare_fails(run, cand, "records.jsonl:2", "nested too deep")


def test_metric_versions_as_a_list_names_metrics_json(run, tmp_path):
    cand = _copy(run, tmp_path)
    metrics = json.loads((cand / "metrics.json").read_text(encoding="utf-8"))
    metrics["metric_versions"] = list(metrics["metric_versions"].values())
    (cand / "metrics.json").write_text(json.dumps(metrics), encoding="utf-8")
    _compare_fails(run, cand, "metrics.json", "metric_versions")


def test_a_case_recorded_twice_is_refused(run, tmp_path):
    cand = _copy(run, tmp_path)
    lines = _lines(cand)
    cid = json.loads(lines[0])["case_id"]
    _write(cand, lines + [lines[0]])
    _compare_fails(run, cand, f"records.jsonl:{len(lines) + 1}", cid, "recorded twice")


def test_rows_are_light_and_flipped_answers_are_read_again(run, tmp_path):
    from raglab.compare.comparison import compare_runs
    from raglab.compare.config import CompareCfg
    from raglab.compare.load import ROW_FIELDS, load_dir, read_rows

    rows = read_rows(run / "records.jsonl")
    assert rows and all(set(r) <= {"case_id", "tags", "gold", "metrics", *ROW_FIELDS}
                        for r in rows)
    assert all(r["gold"] == {"answerable": r["gold"]["answerable"]} for r in rows)
    # a candidate whose first case flips on correctness, with another answer
    cand = _copy(run, tmp_path)
    lines = _lines(cand)
    obj = json.loads(lines[0])
    obj["metrics"]["correctness"] = 0.0 if (obj["metrics"].get("correctness") or 0) >= 0.5 \
        else 1.0
    obj["output"]["answer"] = "a different answer"
    lines[0] = json.dumps(obj) + "\n"
    _write(cand, lines)
    comp = compare_runs(load_dir("base", run), load_dir("cand", cand),
                        CompareCfg(flip_thresholds={"correctness": 0.5}))
    flips = comp.flipped["correctness"]
    shown = flips["pass_to_fail"] + flips["fail_to_pass"]
    assert [x["case_id"] for x in shown] == [obj["case_id"]]
    base_answer = json.loads(_lines(run)[0])["output"]["answer"]
    assert shown[0]["baseline_answer"] == base_answer
    assert shown[0]["candidate_answer"] == "a different answer"


def test_a_weight_that_is_not_a_finite_number_at_least_0_is_refused(run, tmp_path):
    # before: exit 0 here (the candidate's weights are not read); as the baseline's,
    # "ValueError: weights must be finite and >= 0" (an unexpected error) from compare and
    # decide, and from a sequential run against it after some of its cases
    cand = _copy(run, tmp_path)
    lines = _lines(cand)
    obj = json.loads(lines[1])
    _write(cand, [lines[0], json.dumps({**obj, "weight": -1}) + "\n", *lines[2:]])
    _compare_fails(run, cand, "records.jsonl:2", obj["case_id"], "weight -1",
                   "finite number >= 0")
    from raglab.compare.load import read_rows
    from raglab.errors import UserError

    for bad, shown in ((None, "null"), (True, "true")):   # (a TypeError, or read as 1)
        _write(cand, [lines[0], json.dumps({**obj, "weight": bad}) + "\n", *lines[2:]])
        with pytest.raises(UserError, match=f"records.jsonl:2 case .*weight {shown}: "):
            read_rows(cand / "records.jsonl")
    _write(cand, [lines[0], json.dumps({**obj, "weight": 0}) + "\n", *lines[2:]])
    assert read_rows(cand / "records.jsonl")[1]["weight"] == 0
