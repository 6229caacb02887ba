"""Decision records that can be handed over: never overwritten, listed in the study's
index, HTML beside the Markdown, and compare outputs never silently replaced (CLI,
real runs of the tiny dataset)."""

import json
import re
import tempfile
from datetime import date
from pathlib import Path

import pytest

from tests.compare.test_decide_cli import runs  # noqa: F401  (the module's fixture)
from tests.conftest import run_cli

pytestmark = pytest.mark.slow  # numbered records and folders, end to end over several CLI runs


def _decide(runs, study, *extra):  # noqa: F811
    return run_cli("decide", str(runs["base"]), str(runs["same"]), "gates=default",
                   "--study", str(study), *extra, cwd=study.parent)


def test_two_decisions_in_one_day_are_both_kept_and_indexed(runs, tmp_path):  # noqa: F811
    study = tmp_path / "study"
    first = _decide(runs, study, "--question", "first")
    second = _decide(runs, study, "--question", "second")
    assert first.returncode in (0, 1, 4) and second.returncode in (0, 1, 4), second.stderr
    today = date.today().isoformat()
    one, two = f"decision-{today}-default", f"decision-{today}-default-2"
    for stem in (one, two):
        for suffix in (".json", ".md", ".html"):
            assert (study / f"{stem}{suffix}").is_file(), f"{stem}{suffix}"
    assert json.loads((study / f"{one}.json").read_text())["question"] == "first"
    assert json.loads((study / f"{two}.json").read_text())["question"] == "second"
    assert f"{two}.html" in second.stdout
    index = (study / "decisions.md").read_text()
    rows = re.findall(r"^\| (\d+) \|.*\[(decision-[^\]]+)\.md\]", index, re.M)
    assert rows == [("1", one), ("2", two)]
    html = (study / f"{two}.html").read_text()
    assert html.lstrip().lower().startswith("<!doctype html") and "<table>" in html
    assert "second" in html


def test_compare_into_a_folder_that_holds_a_comparison_is_refused(runs, tmp_path):  # noqa: F811
    out = tmp_path / "cmp"
    ok = run_cli("compare", str(runs["base"]), str(runs["same"]), "--out", str(out),
                 cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    before = (out / "compare.json").read_bytes()
    again = run_cli("compare", str(runs["base"]), str(runs["leaky"]), "--out", str(out),
                    cwd=tmp_path)
    assert again.returncode == 2
    assert again.stderr.strip().count("\n") == 0 and "already holds a comparison" in again.stderr
    assert (out / "compare.json").read_bytes() == before


def test_compare_into_its_default_folder_twice_numbers_the_second(runs, tmp_path):  # noqa: F811
    import shutil

    root = tmp_path / "w"
    shutil.copytree(runs["base"], root / "base")
    shutil.copytree(runs["same"], root / "same")
    for _ in range(2):
        proc = run_cli("compare", "base", "same", cwd=root)
        assert proc.returncode == 0, proc.stderr
    folders = sorted(p.name for p in root.iterdir() if p.name.startswith("compare-"))
    assert len(folders) == 2 and folders[1] == folders[0] + "-2"
    assert all((root / f / "compare.json").is_file() for f in folders)


def test_the_index_lists_an_unreadable_record_without_failing(runs, tmp_path):  # noqa: F811
    study = tmp_path / "study"
    study.mkdir()
    (study / "decision-2020-01-01-old.json").write_text("{not json")
    proc = _decide(runs, study)
    assert proc.returncode in (0, 1, 4), proc.stderr
    index = (study / "decisions.md").read_text()
    assert "decision-2020-01-01-old.json" in index and "(unreadable)" in index


def _strings(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, str):
        yield value


def assert_no_foreign_path(record_file, project):
    """Every local path in a decision record (JSON, Markdown, HTML) resolves inside the
    project folder; none is absolute, none points into the installed package."""
    import raglab

    pkg = str(Path(raglab.__file__).resolve().parent)
    rec = json.loads(record_file.read_text())
    for text in _strings(rec):
        if "://" in text or "/" not in text or " " in text.strip():
            continue
        assert not text.startswith(("/", "~")), text
        target = (record_file.parent / text).resolve()
        assert target.is_relative_to(project.resolve()), text
    for suffix in (".md", ".html", ".json"):
        body = record_file.with_suffix(suffix).read_text()
        for foreign in (str(tempfile.gettempdir()) + "/", pkg, str(Path.home()) + "/"):
            if project.resolve().is_relative_to(Path(foreign.rstrip("/")).resolve()):
                continue  # the test's own project lives there: only paths outside it count
            assert foreign not in body, (suffix, foreign)
        for m in re.finditer(r"(?:\.\./)+[^\s|)`\"]+", body):
            assert (record_file.parent / m.group(0)).resolve().is_relative_to(
                project.resolve()), (suffix, m.group(0))


def test_no_path_in_a_record_points_outside_its_project(runs, tmp_path):  # noqa: F811
    """Runs in another folder (a temporary one), the shipped gate set: the record names
    them (label, sha256) and points nowhere outside the project; a gate file and a run
    inside the project are named by a path relative to the record."""
    import shutil

    project = tmp_path / "project"
    (project / "ci").mkdir(parents=True)
    study = project / "experiments" / "k"
    outside = run_cli("decide", str(runs["base"]), str(runs["same"]), "gates=default",
                      "--study", str(study), cwd=project)
    assert outside.returncode in (0, 1, 4), outside.stderr
    (rec_file,) = study.glob("decision-*.json")
    rec = json.loads(rec_file.read_text())
    assert rec["baseline"]["run_dir"] is None and rec["baseline"]["ref"] is None
    assert rec["baseline"]["label"] == "base" and rec["candidate"]["label"] == "same"
    assert rec["gates"]["source"] is None and rec["gates"]["shipped"] is True
    assert re.fullmatch(r"[0-9a-f]{64}", rec["gates"]["sha256"])
    assert re.fullmatch(r"[0-9a-f]{64}", rec["gates"]["file_sha256"])
    assert rec["baseline"]["config"]["cache_dir"] == "(outside the project)/cache"
    md = rec_file.with_suffix(".md").read_text()
    assert "Gate set `default` (shipped with raglab; sha256 " in md
    assert "outside the project (not named by path)" in md
    assert_no_foreign_path(rec_file, project)

    shutil.copytree(runs["base"], project / "runs" / "base")
    shutil.copytree(runs["same"], project / "runs" / "same")
    shutil.copy(Path(__file__).resolve().parents[2] / "conf" / "gates" / "default.yaml",
                project / "ci" / "gates.yaml")
    gates = project / "ci" / "gates.yaml"
    gates.write_text(gates.read_text().replace("defaults:\n  - /schema/gates@_here_\n"
                                               "  - _self_\n", ""))
    inside = run_cli("decide", "runs/base", "runs/same", "gates=ci/gates.yaml",
                     "--study", "experiments/k", cwd=project)
    assert inside.returncode in (0, 1, 4), inside.stderr
    rec_file = max(study.glob("decision-*-gates*.json"))
    rec = json.loads(rec_file.read_text())
    assert rec["gates"]["source"] == "../../ci/gates.yaml"
    assert rec["baseline"]["run_dir"] == "../../runs/base"
    assert_no_foreign_path(rec_file, project)


def test_compare_outputs_name_runs_outside_the_project_without_their_path(
        runs, tmp_path):  # noqa: F811
    project = tmp_path / "project"
    project.mkdir()
    proc = run_cli("compare", str(runs["base"]), str(runs["same"]), "--out", "cmp",
                   cwd=project)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((project / "cmp" / "compare.json").read_text())
    assert doc["baseline"]["run_dir"] == "(outside the project)/base"
    assert doc["baseline"]["ref"] == "(outside the project)/base"
    for name in ("compare.md", "compare.html", "compare.json"):
        assert str(runs["root"]) not in (project / "cmp" / name).read_text(), name
    inside = run_cli("compare", str(runs["base"]), str(runs["same"]), "--out",
                     str(runs["root"] / "cmp-inside"), cwd=runs["root"])
    assert inside.returncode == 0, inside.stderr
    doc = json.loads((runs["root"] / "cmp-inside" / "compare.json").read_text())
    assert doc["candidate"]["run_dir"] == "../same"
