"""Issue 24, defect 13: terminal and Markdown injection. Tag values, run names and slice
values are the user's text: printed to a terminal, their control characters are shown, not
obeyed; written to Markdown (report.md, compare.md, a decision record, the MLflow run note),
they render as text, never as HTML, a link or a new heading. On GitHub Actions no slice
value, path or argument starts a workflow command (``::...``) of its own, in decide's
annotations, its other lines or the pytest helper's message. Real CLI runs."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import TINY_CASES, TINY_CORPUS, run_cli, write_jsonl
from tests.reliability.harden import BASE, one_line

ESC = "\x1b]0;pwned\x07\x1b[31mred\x1b[0m"
EVIL = ["<script>alert(1)</script>", "<img src=x onerror=alert(2)>",
        "[click](javascript:alert(3))", "x\n# injected heading", ESC]
RUN_NAME = "<img src=x onerror=alert(9)>"
#: slice values (tag ``ci``, one per case) aimed at GitHub's workflow commands: a line break
#: that starts a command of its own, an OSC title and colour escapes, a bidi override, and
#: GitHub's own escapes and separators (``%0A``, ``:``, ``,``) with a carriage return
CI_EVIL = ["x\n::add-mask::x\n::set-output name=a::b", ESC, "plain",
           "a\u202eb 100%0A::warning::y,z:w\r::error::e"]
#: a study folder whose name starts two workflow commands on lines of their own
STUDY = "st\n::add-mask::x\n::warning::pwned"
#: every workflow command raglab itself prints
OURS = ("::error title=raglab decide%3A ", "::warning title=raglab decide%3A ")


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
    for c, value in zip(cases, CI_EVIL, strict=True):
        c["tags"]["ci"] = value
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
    out = root / "cmp\n::add-mask::c"  # the folder's name starts no workflow command
    proc = run_cli("compare", str(root / "a"), str(root / "b"), "--out", str(out),
                   cwd=root, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "\x1b" not in proc.stdout + proc.stderr
    assert "cmp\\x0a::add-mask::c/compare.md" in proc.stdout
    assert not [ln for ln in _lines(proc.stdout + proc.stderr) if ln.startswith("::")]
    text = (out / "compare.md").read_text()
    assert not _raw_markup(text)
    assert "evil=x # injected heading" in text  # the newline is a space, in its table row


def test_compare_terminal_keeps_a_run_label_on_its_line(evil_runs):
    """A run's label (its directory's name, or its run_name) is in compare's title line: a
    line break in it starts no line of its own (under GitHub Actions, '::error' would be a
    workflow command)."""
    import shutil

    root, _, _ = evil_runs
    cand = root / "pr\n::error title=x::injected"
    if not cand.exists():
        shutil.copytree(root / "b", cand)
    proc = run_cli("compare", str(root / "a"), str(cand), "--out", str(root / "cmp-label"),
                   cwd=root, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert not [ln for ln in _lines(proc.stdout + proc.stderr) if ln.startswith("::")]
    assert "pr\\x0a::error title=x::injected" in proc.stdout


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


def _lines(text: str) -> list[str]:
    """Lines as GitHub's runner reads a step's output (CR, LF or CRLF end one)."""
    return re.split(r"\r\n|\r|\n", text)


def _unescape(value: str, prop: bool) -> str:
    """A workflow command's value as GitHub's runner reads it back."""
    pairs = [("%0D", "\r"), ("%0A", "\n")] + ([("%3A", ":"), ("%2C", ",")] if prop else [])
    for code, ch in [*pairs, ("%25", "%")]:
        value = value.replace(code, ch)
    return value


@pytest.fixture(scope="module")
def ci_decision(evil_runs):
    """One decision on GitHub Actions: a gate that fails on every slice of ``ci`` with a
    context (``::error``) and one that no slice settles (``::warning``), into a study
    folder, a JUnit file and a comment whose names hold workflow commands."""
    root, _, _ = evil_runs
    gates = root / "ci-gates.yaml"
    gates.write_text("critical_slices:\n  - {key: ci}\ngates:\n"
                     "  - {metric: faithfulness, rule: non_inferior, margin: 0.05,"
                     " slices: critical}\n"
                     "  - {metric: final.context_tokens, rule: bound, max: 1,"
                     " slices: critical}\n")
    summary = root / "step-summary.md"
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}
    proc = run_cli("decide", str(root / "a"), str(root / "b"), f"gates={gates}",
                   "--study", STUDY, "--junit", f"{STUDY}/junit.xml", "--comment",
                   f"{STUDY}/comment.md", cwd=root, env=env, timeout=120)
    assert proc.returncode == 1, proc.stderr
    (rec,) = (root / STUDY).glob("decision-*.json")
    return proc, json.loads(rec.read_text()), root / STUDY, summary


def test_annotations_escape_slice_values_by_githubs_rules(ci_decision):
    """Every ``::`` line is one of raglab's annotations, one per failed or inconclusive
    check, and GitHub reads its title back as the terminal shows the check: controls and
    bidi overrides visible, no line break, ``%``, ``:`` and ``,`` as written."""
    from raglab.text.escape import term

    proc, rec, _, summary = ci_decision
    out = proc.stdout + proc.stderr
    assert not re.search("[\x1b\x07\u202e]", out)
    commands = [ln for ln in _lines(out) if ln.startswith("::")]
    assert commands and all(ln.startswith(OURS) for ln in commands), commands
    shown = [r for r in rec["results"] if r["status"] in ("fail", "inconclusive")]
    assert len(commands) == len(shown)
    assert {r["slice"]["value"] for r in shown if r["slice"]} >= {CI_EVIL[0], ESC, CI_EVIL[3]}
    for line, r in zip(commands, shown, strict=True):
        props, message = line.split(" ", 1)[1].split("::", 1)
        (title,) = [_unescape(p.split("=", 1)[1], prop=True) for p in props.split(",")]
        where = f"ci={r['slice']['value']}" if r["slice"] else "overall"
        assert title == f"raglab decide: {term(r['gate'] + ' [' + where + ']')}"
        assert "\n" not in _unescape(message, prop=False)
    assert "ci=x\\x0a%3A%3Aadd-mask%3A%3Ax" in proc.stdout
    assert "100%250A%3A%3Awarning%3A%3Ay%2Cz%3Aw\\x0d%3A%3Aerror%3A%3Ae" in proc.stdout
    assert not re.search("[\x1b\x07\u202e\r]", summary.read_text())


def test_paths_printed_in_ci_mode_start_no_workflow_command(ci_decision):
    """A study, JUnit or comment path with line breaks is printed on one line (shown as
    ``\\x0a``); the comment's marker stays its first line; the JUnit names show controls."""
    proc, _, study, _ = ci_decision
    lines = [ln for ln in _lines(proc.stdout + proc.stderr) if ln]
    assert not [ln for ln in lines if ln.startswith("::") and not ln.startswith(OURS)]
    wrote = [ln for ln in lines if ln.startswith("wrote ")]
    assert len(wrote) == 3 and all("st\\x0a::add-mask::x\\x0a::warning::pwned" in ln
                                   for ln in wrote), wrote
    body = (study / "comment.md").read_text()
    assert body.splitlines()[0] == \
        "<!-- raglab-decision: st\\x0a::add-mask::x\\x0a::warning::pwned -->"
    junit = (study / "junit.xml").read_text()
    assert "\u202e" not in junit and "ci=a\\u202eb" in junit and "ci=x\\x0a::add" in junit
    bad = run_cli("decide", "a", "b", "--x\n::add-mask::y", cwd=study.parent, timeout=60)
    assert one_line(bad).endswith("--x ::add-mask::y (see raglab decide --help)")


def test_assert_go_message_puts_no_slice_text_at_a_line_start(evil_runs, tmp_path):
    """The pytest helper's message (through a real ``raglab decide``): controls visible,
    every line its own (a gate, the heading, the record), none begun by a slice value."""
    from raglab.pytest_plugin import _decide, assert_go

    root, _, _ = evil_runs
    decision = _decide(tmp_path, root / "a", root / "b", str(root / "ci-gates.yaml"))
    with pytest.raises(AssertionError) as e:
        assert_go(decision)
    message = str(e.value)
    assert not re.search("[\x1b\x07\u202e\r]", message)
    for line in message.split("\n"):
        assert line.startswith(("raglab decide: NO-GO", "  ", "record: ")), line
    assert "- final.context_tokens bound [ci=x\\x0a::add-mask::x\\x0a::set-output" in message
    assert "[ci=\\x1b]0;pwned\\x07" in message and "[ci=a\\u202eb 100%0A" in message
