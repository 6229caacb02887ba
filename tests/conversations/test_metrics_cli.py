"""Conversation metrics and clustered comparisons through the CLI: two runs of the tiny
conversation set, one system that ignores the history ("deaf") and one that reads it
("chat"); their metrics.json and reports, then ``raglab compare`` and ``raglab decide``
(clustered by conversation by default)."""

from __future__ import annotations

import json
from datetime import date

import pytest

from tests.conftest import run_cli, write_jsonl
from tests.conversations.conftest import CONVERSATIONS, CORPUS
from tests.conversations.test_run import SYSTEM


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("convruns")
    corpus = write_jsonl(root / "corpus.jsonl", CORPUS)
    cases = write_jsonl(root / "conversations.jsonl", CONVERSATIONS)
    (root / "chat_sut.py").write_text(SYSTEM)
    for name, extra in (("deaf", ["+system.options.history=false"]), ("chat", [])):
        r = run_cli("run", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                    "dataset.labels=null", "system=python", "system._target_=chat_sut.make",
                    f"+system.options.corpus={corpus}", f"+system.options.log={root / name}.log",
                    "tracking=none", "grader=heuristic", "progress=off",
                    f"hydra.run.dir={root / name}", f"cache_dir={root / 'cache'}", *extra,
                    cwd=root)
        assert r.returncode in (0, 1), r.stderr
    return root


def _metrics(root, name):
    return json.loads((root / name / "metrics.json").read_text())


def test_metrics_json_has_the_conversations_section_and_flat_figures(runs):
    deaf, chat = _metrics(runs, "deaf"), _metrics(runs, "chat")
    for m in (deaf, chat):
        c = m["conversations"]
        assert list(c) == ["n", "n_incomplete", "history", "all_turns_correct",
                           "first_failing_turn", "knowledge_retention",
                           "follow_up_resolution", "version"]
        assert c["n"] == 3 and c["n_incomplete"] == 0 and c["history"] == "reference"
        assert list(c["first_failing_turn"]) == ["1", "2", "3", "none"]
        assert sum(c["first_failing_turn"].values()) == pytest.approx(1.0)
        # conv-3.t2's non-vital fact from turn 1 ("refunded on Monday") is not in either
        # answer (the first sentence of the escalation document)
        assert c["knowledge_retention"] == 0.0
        assert "conversation" not in m["metric_versions"]
        assert {k: v for k, v in m["overall"].items() if k.startswith("conversation.")} == {
            "conversation.all_turns_correct": c["all_turns_correct"],
            "conversation.knowledge_retention": c["knowledge_retention"],
            "conversation.follow_up_resolution": c["follow_up_resolution"]["ratio"]}
    # ignoring the history: the follow-ups find nothing; reading it: as well as first turns
    assert deaf["conversations"]["follow_up_resolution"] == {
        "follow_up_recall": 0.0, "first_recall": 1.0, "ratio": 0.0}
    assert chat["conversations"]["follow_up_resolution"] == {
        "follow_up_recall": 1.0, "first_recall": 1.0, "ratio": 1.0}
    # conv-1 and conv-2 fail at their follow-up turn in both runs (deaf: retrieval; chat:
    # its one-sentence answers miss the follow-up's vital nugget); conv-3 passes
    for m in (deaf, chat):
        assert m["conversations"]["all_turns_correct"] == pytest.approx(1 / 3)
        assert m["conversations"]["first_failing_turn"] == pytest.approx(
            {"1": 0.0, "2": 2 / 3, "3": 0.0, "none": 1 / 3})
    # MLflow logs the flat figures that apply (a null one is not logged)
    from raglab.tracking.keys import metrics_from_summary

    logged = metrics_from_summary(deaf)
    assert logged["conversation.all_turns_correct"] == pytest.approx(1 / 3)
    assert logged["conversation.follow_up_resolution"] == 0.0
    assert not any(k.startswith("conversations") for k in logged)
    md = (runs / "deaf" / "report.md").read_text()
    assert "## Conversations" in md and "| follow-up resolution" in md
    assert "<h2>Conversations</h2>" in (runs / "deaf" / "report.html").read_text()


def test_the_comparison_of_the_two_runs_clusters_by_conversation(runs):
    """In process (fast): unset clusters by conversation; an explicit setting wins."""
    from raglab.compare.comparison import compare_runs, load_run
    from raglab.compare.config import CompareCfg

    base, cand = load_run(str(runs / "deaf")), load_run(str(runs / "chat"))
    for given, key, n in ((None, "conversation", 3), ("none", None, None),
                          ("intent", "intent", 4)):  # conv-3 has no intent: its own cluster
        s = compare_runs(base, cand, CompareCfg(cluster=given, n_bootstrap=200)).settings
        assert (s["cluster"], s["n_clusters"]) == (key, n), given
        if given is None:
            assert s["clustering"] == "clustered by conversation (3 conversations)"


def test_a_sweep_of_conversation_runs_says_its_comparisons_are_clustered(runs):
    from raglab.compare.comparison import load_run
    from raglab.compare.config import CompareCfg
    from raglab.compare.sweep import Job, compare_sweep
    from raglab.compare.sweep_render import render_sweep_md, render_sweep_terminal

    jobs = [Job(name, str(i), {"history": name}, load_run(str(runs / name)))
            for i, name in enumerate(("deaf", "chat"))]
    sc = compare_sweep(str(runs), jobs, ["history"], jobs[0],
                       CompareCfg(n_bootstrap=200, family_permutations=200))
    assert sc.settings["clustering"] == "clustered by conversation (3 conversations)"
    assert ("comparison with the baseline is clustered by conversation (3 conversations); "
            "the sweep-wide family is not clustered") in render_sweep_md(sc)
    # the terminal says it too (docs/conversations.md: every output says it)
    assert ("each job's comparison clustered by conversation (3 conversations); the "
            "best group is not clustered") in render_sweep_terminal(sc, list(sc.cells))


@pytest.mark.slow
def test_compare_clusters_by_conversation_by_default(runs, tmp_path):
    r = run_cli("compare", str(runs / "deaf"), str(runs / "chat"), "--out",
                str(tmp_path / "c"), "--set", "n_bootstrap=200", cwd=runs)
    assert r.returncode == 0, r.stderr
    assert "clustered by conversation (3 conversations)" in r.stdout
    s = json.loads((tmp_path / "c" / "compare.json").read_text())["settings"]
    assert (s["cluster"], s["n_clusters"], s["clustering"]) == (
        "conversation", 3, "clustered by conversation (3 conversations)")
    assert "Clustered by conversation (3 conversations)" in \
        (tmp_path / "c" / "compare.md").read_text()
    assert "Clustered by conversation (3 conversations)" in \
        (tmp_path / "c" / "compare.html").read_text()
    # turned off, or another tag: the setting wins
    r = run_cli("compare", str(runs / "deaf"), str(runs / "chat"), "--out",
                str(tmp_path / "off"), "--set", "cluster=none", "--set", "n_bootstrap=200",
                cwd=runs)
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "off" / "compare.json").read_text())["settings"]
    assert s["cluster"] is None and s["n_clusters"] is None and "clustering" not in s
    assert "clustered by" not in r.stdout


@pytest.mark.slow
def test_decide_clusters_by_conversation_and_says_so(runs):
    study = runs / "study"
    r = run_cli("decide", str(runs / "deaf"), str(runs / "chat"), "gates=default",
                "--study", str(study), "--set", "n_bootstrap=200", cwd=runs)
    assert r.returncode in (0, 1, 4), r.stderr
    stem = study / f"decision-{date.today().isoformat()}-default"
    rec = json.loads(stem.with_suffix(".json").read_text())
    assert rec["settings"]["cluster"] == "conversation"
    assert rec["settings"]["clustering"] == "clustered by conversation (3 conversations)"
    assert "(clustered by conversation (3 conversations))" in stem.with_suffix(".md").read_text()


def test_a_turns_labelling_row_shows_the_conversation_so_far(runs):
    """A person labels a follow-up ("And what about the charge on top?") with the messages
    the system was given before it; a first turn's row has an empty history."""
    r = run_cli("label", str(runs / "chat"), "--n", "7", "--metrics", "relevance", cwd=runs)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in
            (runs / "chat" / "labels" / "to-label.jsonl").read_text().splitlines()]
    by = {row["case_id"]: row for row in rows}
    assert by["conv-1.t1"]["history"] == []
    assert by["conv-1.t2"]["history"] == [
        {"role": "user", "content": "How long do refunds take to reach the card?"},
        {"role": "assistant", "content": "Within 5 business days."}]
    assert "history" not in json.dumps(
        [row for row in rows if not row["case_id"].startswith("conv-")])


def test_compare_warns_when_the_runs_gave_the_turns_different_histories(runs, tmp_path):
    """A run with conversation.history=own against one with the reference history: the
    turns are paired by id, but they did not answer the same conversation."""
    import shutil

    from raglab.compare.comparison import compare_runs, load_run
    from raglab.compare.config import CompareCfg

    own = tmp_path / "own"
    shutil.copytree(runs / "chat", own)
    m = json.loads((own / "metrics.json").read_text())
    m["conversations"]["history"] = "own"
    (own / "metrics.json").write_text(json.dumps(m))
    cfg = CompareCfg(n_bootstrap=200)
    same = compare_runs(load_run(str(runs / "deaf")), load_run(str(runs / "chat")), cfg)
    assert not [w for w in same.warnings if "conversation.history" in w]
    other = compare_runs(load_run(str(runs / "deaf")), load_run(str(own)), cfg)
    assert ("the runs gave the turns different histories (conversation.history: baseline "
            "reference, candidate own): paired by turn, the turns did not answer the same "
            "conversations") in other.warnings


def test_plan_says_it_treats_a_conversations_turns_as_independent(runs):
    """decide clusters turns by conversation; plan's figures assume independent cases,
    and the plan says so instead of passing them off as the decision's."""
    r = run_cli("plan", str(runs / "chat"), "gates=default", cwd=runs)
    assert r.returncode == 0, r.stderr
    assert ("  (the plan treats the 7 turns as independent cases; decide clusters them by "
            "conversation (3 conversations), so it may need more)") in r.stdout.splitlines()


def test_from_run_drafts_a_failing_turn_with_the_conversation_before_it(runs, tmp_path):
    """A failing follow-up alone ("And what about the charge on top?") is no case: its
    draft is its conversation up to it, one draft per conversation, the failing turns and
    their reasons in the note."""
    from raglab.data.conversation import flatten

    out = tmp_path / "failing.jsonl"
    r = run_cli("cases", "from-run", str(runs / "chat"), "--out", str(out), cwd=runs)
    assert r.returncode == 0, r.stderr
    drafts = [json.loads(line) for line in out.read_text().splitlines()]
    failing = [t for d in drafts for t in d["draft"]["failing_turns"]]
    assert {"conv-1.t2", "conv-2.t2"} <= set(failing)
    assert f"{len(failing)} failing case(s) of 7 written to {out}" in r.stdout
    assert len({d["id"] for d in drafts}) == len(drafts)
    for d in drafts:
        assert "turns" in d and "question" not in d, d["id"]
        last = f"{d['id']}.t{len(d['turns'])}"
        assert d["draft"]["case_id"] == last == d["draft"]["failing_turns"][-1]
        assert set(d["draft"]["turns"]) == set(d["draft"]["failing_turns"])
        cases = flatten({k: v for k, v in d.items() if k != "draft"}, file="x", line=1)
        assert cases[-1].conversation.history or len(cases) == 1
    conv1 = next(d for d in drafts if d["id"] == "conv-1")
    assert conv1["turns"][1]["question"] == "And what about the charge on top?"
    assert conv1["user"] == {"id": "u1", "groups": ["customer"]}


def _with_single_turn_cases(runs, tmp_path, name):
    """A copy of a run with two single-turn cases beside its conversations' turns."""
    import shutil

    out = tmp_path / name
    shutil.copytree(runs / name, out)
    path = out / "records.jsonl"
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    first = next(r for r in recs if r["case_id"] == "conv-2.t1")
    for cid in ("single-1", "single-2"):
        rec = {k: v for k, v in first.items() if k != "conversation"}
        rec["case_id"], rec["tags"] = cid, {"intent": "exports"}
        rec["output"] = {**rec["output"], "case_id": cid}
        recs.append(rec)
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    m = json.loads((out / "metrics.json").read_text())
    m["n_cases"] = len(recs)
    (out / "metrics.json").write_text(json.dumps(m))
    return out


def test_single_turn_cases_beside_conversations_are_not_called_conversations(runs, tmp_path):
    """A mixed set (3 conversations, 2 single-turn cases, each its own unit): the comparison
    said "clustered by conversation (5 conversations)" and plan "the 9 turns"."""
    from raglab.compare.comparison import compare_runs, load_run
    from raglab.compare.config import CompareCfg
    from raglab.compare.render import cluster_words

    deaf, chat = (_with_single_turn_cases(runs, tmp_path, n) for n in ("deaf", "chat"))
    s = compare_runs(load_run(str(deaf)), load_run(str(chat)), CompareCfg(n_bootstrap=200)
                     ).settings
    said = "3 conversations; 2 single-turn cases, each its own unit"
    assert s["clustering"] == f"clustered by conversation ({said})"
    assert (s["n_clusters"], s["n_untagged"]) == (5, 2)
    assert cluster_words(s).startswith(f"Clustered by conversation ({said}): the turns")
    r = run_cli("plan", str(chat), "gates=default", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (f"  (the plan treats the 9 cases as independent cases; decide clusters them by "
            f"conversation ({said}), so it may need more)") in r.stdout.splitlines(), r.stdout


def test_a_flipped_turn_is_shown_with_its_question(runs):
    """compare's flipped cases (compare.md, .html, .json, the decision record) looked each
    case's question up by its id on a line of the cases file: a turn's was '(question not
    found)'."""
    from raglab.compare.comparison import compare_runs, load_run
    from raglab.compare.config import CompareCfg

    comp = compare_runs(load_run(str(runs / "deaf")), load_run(str(runs / "chat")),
                        CompareCfg(n_bootstrap=200))
    fixed = comp.flipped["final.evidence_recall"]["fail_to_pass"]
    assert {x["case_id"]: x["question"] for x in fixed} == {
        "conv-1.t2": "And what about the charge on top?",
        "conv-2.t2": "And for how long can I get them afterwards?"}


def test_from_run_keeps_a_single_turn_case_whose_tags_name_a_conversation(runs, tmp_path):
    """A single-turn case (logged from a chat: tags conversation=conv-2, turn=2) that
    fails was taken for conv-2's turn 2: folded into conv-2's draft, its own draft lost."""
    import shutil

    from raglab.cases.drafts import drafts_from_run

    run = tmp_path / "chat"
    shutil.copytree(runs / "chat", run)
    recs = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    rec = {k: v for k, v in next(r for r in recs if r["case_id"] == "conv-2.t2").items()
           if k != "conversation"}
    rec.update(case_id="s1", tags={"conversation": "conv-2", "turn": "2"})
    rec["output"] = {**rec["output"], "case_id": "s1"}
    (run / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [*recs, rec]))
    single = {"id": "s1", "question": "How long are exports kept?", "tags": rec["tags"],
              "evidence": CONVERSATIONS[1]["turns"][1]["evidence"]}
    cases = write_jsonl(tmp_path / "cases.jsonl", [*CONVERSATIONS, single])
    config = (run / "config.yaml").read_text()
    (run / "config.yaml").write_text(config.replace(str(runs / "conversations.jsonl"),
                                                    str(cases)))
    drafts, n = drafts_from_run(run)
    assert n == 8
    by_id = {d["id"]: d for d in drafts}
    assert by_id["s1"]["question"] == "How long are exports kept?"
    assert "s1" not in by_id["conv-2"]["draft"]["failing_turns"]


def test_identical_runs_of_three_conversations_are_not_a_go(runs, tmp_path):
    """Clustered by conversation, 3 units: the sign-flip interval cannot exclude any value,
    so a non-inferiority gate is inconclusive. Every conversation's difference being the
    same (0 here) made it [0, 0] and the decision GO."""
    import shutil

    twin = tmp_path / "deaf-again"
    shutil.copytree(runs / "deaf", twin)
    gates = tmp_path / "gates.yaml"
    gates.write_text("gates:\n  - {metric: final.evidence_recall, rule: non_inferior, "
                     "margin: 0.05}\n")
    r = run_cli("decide", str(runs / "deaf"), str(twin), f"gates={gates}", "--study",
                str(tmp_path / "study"), cwd=runs)
    (rec,) = [json.loads(p.read_text()) for p in (tmp_path / "study").glob("decision-*.json")]
    assert rec["settings"]["clustering"] == "clustered by conversation (3 conversations)"
    assert r.returncode == 4 and rec["decision"] == "INCONCLUSIVE", r.stdout + r.stderr


def test_compare_warns_when_the_runs_read_different_case_files(runs, tmp_path):
    """An edited earlier turn changes what every later turn was asked: compare says the
    runs used different cases files (only the decision record said so)."""
    import shutil

    edited = tmp_path / "chat-edited"
    shutil.copytree(runs / "chat", edited)
    m = json.loads((edited / "metrics.json").read_text())
    before = m["dataset"]["cases_sha256"]
    m["dataset"]["cases_sha256"] = "f" * 64  # as a run of an edited cases file records it
    (edited / "metrics.json").write_text(json.dumps(m))
    r = run_cli("compare", str(runs / "chat"), str(edited), "--out", str(tmp_path / "out"),
                cwd=runs)
    assert r.returncode == 0, r.stderr
    said = json.loads((tmp_path / "out" / "compare.json").read_text())["warnings"]
    warning = f"the runs used different cases files ({before[:12]} and {'f' * 12})"
    assert [w for w in said if "different" in w and "files" in w] == [warning]
    assert warning in r.stdout + r.stderr
