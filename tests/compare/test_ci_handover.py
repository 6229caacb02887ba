"""The verdict where the release happens, through the CLI: JUnit XML, the GitHub job
summary and annotations, the pull-request comment (GITHUB_* variables pointing at
temporary files), the example workflow's run: steps executed in order (no network), and
the pytest plugin through pytester."""

from __future__ import annotations

import json
import os
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from raglab.compare.ci import COMMENT_LIMIT, comment_body, marker
from tests.compare.test_decide_cli import runs  # noqa: F401  (the module's fixture)
from tests.conftest import TINY_CASES, TINY_CORPUS, run_cli, write_jsonl

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # runs, decide and a pytest subprocess end to end
def test_junit_summary_annotations_and_comment(runs, tmp_path):  # noqa: F811
    summary = tmp_path / "step-summary.md"
    summary.write_text("earlier step\n")
    env = {"GITHUB_STEP_SUMMARY": str(summary), "GITHUB_ACTIONS": "true"}
    proc = run_cli("decide", str(runs["base"]), str(runs["leaky"]), "gates=default",
                   "--study", "study", "--junit", "out/junit.xml", "--comment",
                   "out/comment.md", cwd=tmp_path, env=env)
    assert proc.returncode == 1, proc.stderr
    (rec_file,) = (tmp_path / "study").glob("decision-*.json")
    rec = json.loads(rec_file.read_text())
    failed = [r for r in rec["results"] if r["status"] == "fail"]
    skipped = [r for r in rec["results"] if r["status"] in ("n/a", "inconclusive")]
    assert failed
    # JUnit: one test case per check of the record, failures = failed checks, with why
    suite = ET.parse(tmp_path / "out" / "junit.xml").getroot()
    cases = suite.findall("testcase")
    assert len(cases) == int(suite.get("tests")) == len(rec["results"])
    assert int(suite.get("failures")) == len(failed)
    assert len(suite.findall("testcase/failure")) == len(failed)
    assert len(suite.findall("testcase/skipped")) == len(skipped)
    acl = next(c for c in cases if c.get("name") == "acl_leak_rate bound [overall]")
    assert acl.find("failure").get("message") == next(
        r["reason"] for r in failed if r["metric"] == "acl_leak_rate")
    # the job summary is appended to, never replaced
    text = summary.read_text()
    assert text.startswith("earlier step\n")
    assert "## raglab decide: NO-GO (default)" in text and "Failed gates:" in text
    assert "**acl_leak_rate bound [overall]**" in text
    assert "| gate | slice | baseline | candidate | delta | interval | n | result |" in text
    # one ::error annotation per failed gate, on stdout
    errors = [line for line in proc.stdout.splitlines() if line.startswith("::error ")]
    assert len(errors) == len(failed)
    assert any(line.startswith("::error title=raglab decide%3A acl_leak_rate bound [overall]::")
               for line in errors)
    # the comment: the hidden marker naming the study first, then the summary and record
    body = (tmp_path / "out" / "comment.md").read_text()
    assert body.splitlines()[0] == "<!-- raglab-decision: study -->" == marker("study")
    assert "## raglab decide: NO-GO" in body and "<details>" in body
    assert "# Decision: NO-GO" in body and len(body) <= COMMENT_LIMIT


@pytest.mark.slow  # runs, decide and a pytest subprocess end to end
def test_without_github_variables_nothing_is_annotated(runs, tmp_path):  # noqa: F811
    env = {k: "" for k in ("GITHUB_STEP_SUMMARY",)}
    proc = run_cli("decide", str(runs["base"]), str(runs["leaky"]), "gates=default",
                   "--study", "study", cwd=tmp_path, env=env)
    assert proc.returncode == 1 and "::error" not in proc.stdout


def test_a_long_record_is_cut_to_githubs_limit_with_a_note():
    rec = {"decision": "GO", "name": "g", "baseline": {"label": "a"},
           "candidate": {"label": "b"}, "gates": {"name": "g"}, "results": [],
           "counts": {"pass": 1, "fail": 0, "n/a": 0}, "warnings": []}
    record_md = "\n".join(f"| row {i} | {'x' * 80} |" for i in range(2000))
    body = comment_body(rec, record_md, "experiments/k")
    assert len(body) <= COMMENT_LIMIT and body.startswith("<!-- raglab-decision: experiments/k")
    assert "cut to fit GitHub's 65,536-character comment limit" in body
    assert re.search(r"\| row \d+ \| x+ \|\n\n</details>", body)  # cut at a line end
    assert len(comment_body(rec, "short", "s")) < 2000


def _steps(workflow: Path) -> list[dict]:
    doc = yaml.safe_load(workflow.read_text())
    (job,) = doc["jobs"].values()
    return job["steps"], job.get("env") or {}


@pytest.mark.slow  # two runs and a decision through the workflow's own commands
def test_the_example_workflow_runs_in_order_without_network(tmp_path):
    """Every run: step of examples/ci/github-decide.yml in order, in a project with the
    evaluation set and two replayed outputs files; `uses:` steps (checkout, upload, the
    comment) are GitHub's and the install step needs the network: left out."""
    import shutil

    project = tmp_path / "project"
    (project / "eval").mkdir(parents=True)
    write_jsonl(project / "eval" / "corpus.jsonl", TINY_CORPUS)
    write_jsonl(project / "eval" / "cases.jsonl", TINY_CASES)
    ref = run_cli("run", "dataset.corpus=eval/corpus.jsonl", "dataset.cases=eval/cases.jsonl",
                  "tracking=none", "progress=off", f"hydra.run.dir={tmp_path / 'ref'}",
                  cwd=project)
    assert ref.returncode == 0, ref.stderr
    with open(tmp_path / "ref" / "records.jsonl") as fh:
        outputs = [json.loads(line)["output"] for line in fh]
    for name in ("main", "pr"):
        write_jsonl(project / "eval" / f"outputs-{name}.jsonl", outputs)
    gh_output, summary = tmp_path / "gh-output", tmp_path / "gh-summary"
    gh_output.write_text("")
    steps, job_env = _steps(ROOT / "examples" / "ci" / "github-decide.yml")
    env = {**os.environ, **{k: str(v) for k, v in job_env.items()},
           "GITHUB_OUTPUT": str(gh_output), "GITHUB_STEP_SUMMARY": str(summary),
           "PATH": f"{Path(shutil.which('raglab') or 'raglab').parent}:{os.environ['PATH']}"}
    env.pop("ANTHROPIC_API_KEY", None)
    ran = []
    for step in steps:
        if "run" not in step or step.get("name") == "Install raglab":
            continue
        given = dict(line.split("=", 1) for line in gh_output.read_text().splitlines()
                     if "=" in line)
        script = re.sub(r"\$\{\{\s*steps\.decide\.outputs\.(\w+)\s*\}\}",
                        lambda m, given=given: given.get(m.group(1), ""), step["run"])
        assert "${{" not in script, script
        proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=project,
                              env=env, capture_output=True, text=True, timeout=600)
        ran.append((step["name"], proc.returncode))
        last = step["name"] == "Fail unless GO"
        assert proc.returncode == (1 if last else 0), (step["name"], proc.stdout[-2000:],
                                                       proc.stderr[-2000:])
        if last:   # a team that opts in ships on INCONCLUSIVE
            ok = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=project,
                                env={**env, "ACCEPT_INCONCLUSIVE": "true"})
            assert ok.returncode == 0
    # the same outputs twice on 4 cases: nothing is shown non-inferior, nor a drop, so
    # INCONCLUSIVE; the decide step still succeeds (the record, comment and summary go out)
    # and the last step fails the job
    assert [n for n, _ in ran] == ["Evaluate main's outputs",
                                   "Evaluate this pull request's outputs", "Decide",
                                   "Fail unless GO"]
    assert "status=4" in gh_output.read_text()
    assert (project / "decision-junit.xml").is_file()
    assert (project / "decision-comment.md").read_text().startswith(
        "<!-- raglab-decision: eval/decisions -->")
    assert list((project / "eval" / "decisions").glob("decision-*.html"))
    assert "## raglab decide: INCONCLUSIVE" in summary.read_text()
    assert "Inconclusive gates (what it would take):" in summary.read_text()


PLUGIN_TEST = '''
from raglab.pytest_plugin import assert_go

def test_release_go(raglab_decide):
    decision = raglab_decide({base!r}, {same!r}, {gates!r})
    assert decision.decision == "GO"
    assert_go(decision)


def test_release_no_go(raglab_decide):
    assert_go(raglab_decide({base!r}, {leaky!r}, "default"))
'''


@pytest.mark.slow  # runs, decide and a pytest subprocess end to end
def test_the_pytest_plugin_passes_a_go_and_fails_a_no_go_naming_the_gates(
        runs, tmp_path, pytester):  # noqa: F811
    gates = tmp_path / "g.yaml"
    gates.write_text("gates:\n  - {metric: acl_leak_rate, rule: bound, max: 0}\n"
                     "min_n: 1\n")
    pytester.makepyfile(test_release=PLUGIN_TEST.format(
        base=str(runs["base"]), same=str(runs["same"]), leaky=str(runs["leaky"]),
        gates=str(gates)))
    # installed (pip install), the pytest11 entry point loads the plugin by itself, as in a
    # team's project; from a source tree without the entry point, load it by name
    from importlib.metadata import entry_points

    installed = any(ep.value == "raglab.pytest_plugin"
                    for ep in entry_points(group="pytest11"))
    load = [] if installed else ["-p", "raglab.pytest_plugin"]
    result = pytester.runpytest_subprocess(*load, "-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "AssertionError: raglab decide: NO-GO (base -> leaky, gates default); " \
        "failed gates:" in out
    assert "- acl_leak_rate bound [overall]: candidate 0.25 > 0" in out
    assert "FAILED test_release.py::test_release_no_go" in out


def test_the_plugin_is_declared_as_a_pytest11_entry_point():
    import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["entry-points"]["pytest11"] == {"raglab": "raglab.pytest_plugin"}
