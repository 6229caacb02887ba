"""Decision records that can be handed over: never overwritten, listed in the study's
index, HTML beside the Markdown, and compare outputs never silently replaced (CLI,
real runs of the tiny dataset)."""

import json
import re
from datetime import date

from tests.compare.test_decide_cli import runs  # noqa: F401  (the module's fixture)
from tests.conftest import run_cli


def _decide(runs, study, *extra):  # noqa: F811
    return run_cli("decide", str(runs["base"]), str(runs["same"]), "gates=default",
                   "--study", str(study), *extra, cwd=study.parent)


def test_two_decisions_in_one_day_are_both_kept_and_indexed(runs, tmp_path):  # noqa: F811
    study = tmp_path / "study"
    first = _decide(runs, study, "--question", "first")
    second = _decide(runs, study, "--question", "second")
    assert first.returncode in (0, 1) and second.returncode in (0, 1), second.stderr
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
    assert proc.returncode in (0, 1), proc.stderr
    index = (study / "decisions.md").read_text()
    assert "decision-2020-01-01-old.json" in index and "(unreadable)" in index
