"""Issue 24, defect 13: terminal and Markdown injection. Tag values, run names and slice
values are the user's text: printed to a terminal, their control characters are shown, not
obeyed; written to Markdown (report.md, compare.md, a decision record, the MLflow run note),
they render as text, never as HTML, a link or a new heading. Real CLI runs."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import TINY_CASES, TINY_CORPUS, run_cli, write_jsonl
from tests.reliability.harden import BASE

ESC = "\x1b]0;pwned\x07\x1b[31mred\x1b[0m"
EVIL = ["<script>alert(1)</script>", "<img src=x onerror=alert(2)>",
        "[click](javascript:alert(3))", "x\n# injected heading", ESC]
RUN_NAME = "<img src=x onerror=alert(9)>"


def _raw_markup(text: str) -> list[str]:
    """What of the attack survived as markup in a Markdown text."""
    found = [m for m in ("<script", "<img", "](javascript:", "\x1b", "\x07") if m in text]
    found += [ln for ln in text.splitlines() if re.match(r"\s*#+ injected", ln)]
    return found


@pytest.fixture(scope="module")
def evil_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("evil")
    cases = json.loads(json.dumps(TINY_CASES))
    for i, c in enumerate(cases):
        c["tags"]["intent"] = EVIL[i % len(EVIL)]
        c["tags"]["evil"] = EVIL[(i + 1) % len(EVIL)]
    cases[3]["tags"]["intent"] = ESC
    corpus = write_jsonl(root / "corpus.jsonl", TINY_CORPUS)
    cases_path = write_jsonl(root / "cases.jsonl", cases)
    data = [f"dataset.corpus={corpus}", f"dataset.cases={cases_path}"]
    base = [a for a in BASE if a != "tracking=none"]
    a = run_cli("run", *base, *data, "k=3", f"tracking.uri=sqlite:///{root}/mlflow.db",
                f"run_name='{RUN_NAME}'", f"hydra.run.dir={root}/a", cwd=root)
    assert a.returncode == 0, a.stderr
    b = run_cli("run", *base, *data, "k=2", "tracking=none", f"hydra.run.dir={root}/b",
                cwd=root)
    assert b.returncode == 0, b.stderr
    return root, data, a


def test_escape_helpers():
    from raglab.text.escape import md, md_code, term

    assert term(ESC) == "\\x1b]0;pwned\\x07\\x1b[31mred\\x1b[0m"
    assert term("a\u202eb\nc") == "a\\u202eb\\x0ac"
    assert md("plain text, p < 0.05 and k=3 [95% CI]") == "plain text, p < 0.05 and k=3 [95% CI]"
    assert md("<img src=x onerror=y>") == "&lt;img src=x onerror=y>"
    assert md("</script>") == "&lt;/script>"
    assert md("[a](javascript:x)") == "[a]&#40;javascript:x)"
    assert md("a|b\nc\r# d") == "a\\|b c # d"
    assert md("`code`") == "\\`code\\`"
    assert "\n" not in md("x\u2028y\x85z") and "`" not in md_code("a`b")


def test_validate_shows_control_characters_instead_of_obeying_them(evil_runs):
    root, data, _ = evil_runs
    proc = run_cli("validate", *data, "dataset.labels=null", cwd=root, timeout=60)
    out = proc.stdout + proc.stderr
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b]0;pwned\\x07\\x1b[31mred\\x1b[0m" in out


def test_run_report_and_mlflow_note_render_tags_and_run_name_as_text(evil_runs):
    root, _, run = evil_runs
    assert "\x1b" not in run.stdout + run.stderr
    report = (root / "a" / "report.md").read_text()
    assert not _raw_markup(report)
    assert "&lt;img src=x onerror=alert(2)>" in report  # shown, as text
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{root}/mlflow.db")
    runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
    note = runs[0].data.tags["mlflow.note.content"]
    assert "&lt;img src=x onerror=alert(9)>" in note and not _raw_markup(note)


def test_compare_md_keeps_a_slice_value_in_its_row(evil_runs):
    root, _, _ = evil_runs
    proc = run_cli("compare", str(root / "a"), str(root / "b"), "--out", str(root / "cmp"),
                   cwd=root, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout + proc.stderr
    text = (root / "cmp" / "compare.md").read_text()
    assert not _raw_markup(text)
    assert "evil=x # injected heading" in text  # the newline is a space, in its table row


def test_decide_record_and_console_escape_untrusted_text(evil_runs):
    root, _, _ = evil_runs
    study = root / "study"
    study.mkdir()
    (study / "README.md").write_text("# Is <img src=x onerror=alert(7)> better?\n")
    gates = root / "gates.yaml"
    gates.write_text("critical_slices:\n  - {key: intent}\n  - {key: evil}\n"
                     "gates:\n  - {metric: faithfulness, rule: non_inferior, margin: 0.05,"
                     " slices: critical}\n")
    proc = run_cli("decide", str(root / "a"), str(root / "b"), f"gates={gates}", "--study",
                   str(study), cwd=root, timeout=120)
    assert proc.returncode in (0, 1, 4), proc.stderr
    assert "\x1b" not in proc.stdout + proc.stderr and "\\x1b" in proc.stdout
    text = next(study.glob("decision-*.md")).read_text()
    assert not _raw_markup(text)
    assert "&lt;img src=x onerror=alert(7)>" in text
