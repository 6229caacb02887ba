"""A fuzzy match whose numbers, negations or named entities differ from the quote is not a
match: the case is quarantined as ``changed_fact`` and ``validate`` shows both texts. OCR or
ligature damage is not a changed fact."""

import json

from raglab.data.dataset import load_dataset
from raglab.text.normalize import fact_changes
from tests.conftest import TINY_CASES, TINY_CORPUS, run_cli, write_jsonl

CORPUS = TINY_CORPUS + [
    {"doc_id": "kb/sessions", "title": "Sessions",
     "text": "## Sessions\n\nIdle sessions expire after 60 minutes of inactivity on every plan. "
             "Admins can shorten it."},
    {"doc_id": "kb/plans", "title": "Plan changes",
     "text": "Changes from annual to monthly take effect at renewal; mid-term switches are "
             "prorated to the day."},
]
CASES = TINY_CASES + [
    {"id": "t-5", "question": "When do idle sessions expire?",
     "evidence": [{"doc_id": "kb/sessions",
                   "quote": "Idle sessions expire after 15 minutes of inactivity on every plan"}],
     "nuggets": [{"text": "15 minutes", "vital": True}], "tags": {"intent": "security"}},
    {"id": "t-6", "question": "Are mid-term switches prorated?",
     "evidence": [{"doc_id": "kb/plans",
                   "quote": "mid-term switches are not prorated to the day"}],
     "nuggets": [{"text": "not prorated", "vital": True}], "tags": {"intent": "billing"}},
]


def test_changed_number_negation_and_entity_are_fact_changes():
    assert fact_changes("expire after 15 minutes", "expire after 60 minutes")
    assert fact_changes("switches are not prorated", "switches are prorated")
    assert fact_changes("escalate to the Payments team on call",
                        "escalate to the Billing team on call")
    # OCR and extraction damage to ordinary words changes no fact
    assert not fact_changes("paid back to the original card within 5 business days",
                            "paid back to the orignal card withn 5 business days")
    assert not fact_changes("the refund fee is waived for Pro plans",
                            "tne refund fee is waived for Pro plans")
    assert not fact_changes("Exports run nightly at 02:00 UTC", "Exports run nightIy at 02:00 UTC")


def test_changed_facts_are_quarantined_not_matched(tmp_path):
    c = write_jsonl(tmp_path / "corpus.jsonl", CORPUS)
    k = write_jsonl(tmp_path / "cases.jsonl", CASES)
    ds = load_dataset(c, k)
    q = {x.case_id: x for x in ds.quarantined}
    assert set(q) == {"t-5", "t-6"}
    for cid in ("t-5", "t-6"):
        assert q[cid].kind == "changed_fact" and q[cid].reason.startswith("changed_fact")
    assert "15" in q["t-5"].quote and "60 minutes" in q["t-5"].matched
    assert "not prorated" in q["t-6"].quote and "are prorated" in q["t-6"].matched
    assert {c.id for c in ds.cases} == {"t-1", "t-2", "t-3", "t-4"}


def test_validate_shows_both_texts(tmp_path):
    c = write_jsonl(tmp_path / "corpus.jsonl", CORPUS)
    k = write_jsonl(tmp_path / "cases.jsonl", CASES)
    proc = run_cli("validate", f"dataset.corpus={c}", f"dataset.cases={k}",
                   "dataset.labels=null", cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    lines = {ln.split(" case ")[1].split(":")[0]: ln for ln in proc.stderr.splitlines()
             if "quarantined" in ln}
    assert set(lines) == {"t-5", "t-6"}
    assert f"{k}:5 case t-5: quarantined: changed_fact" in lines["t-5"]
    assert "15 minutes of inactivity" in lines["t-5"] and "60 minutes of inactivity" in lines["t-5"]
    assert "not prorated" in lines["t-6"] and "switches are prorated" in lines["t-6"]
    rows = [json.loads(x) for x in (tmp_path / "quarantine.jsonl").read_text().splitlines()]
    assert [r["case_id"] for r in rows] == ["t-5", "t-6"]
    assert all(r["kind"] == "changed_fact" and r["quote"] and r["matched"] for r in rows)
