"""A tiny conversation set on a tiny corpus, shared by the conversation tests."""

from __future__ import annotations

import pytest

from tests.conftest import write_jsonl

CORPUS = [
    {"doc_id": "kb/refunds", "text": "Refunds are paid back to the original card within 5 "
     "business days. The refund fee is waived for Pro plans.", "metadata": {"product": "pro"}},
    {"doc_id": "kb/exports", "text": "Exports run nightly at 02:00 UTC. Export files stay "
     "downloadable for 30 days.", "metadata": {"product": "pro"}},
    {"doc_id": "internal/escalation", "text": "Escalate payment incidents to the on-call lead "
     "via the PAY-ONCALL rota.", "metadata": {"product": "pro"}, "acl": ["staff"]},
]

ROTA = "on-call lead via the PAY-ONCALL rota"

CONVERSATIONS = [
    {"id": "conv-1", "user": {"id": "u1", "groups": ["customer"]}, "tags": {"intent": "refunds"},
     "turns": [
         {"question": "How long do refunds take to reach the card?",
          "reference_answer": "Within 5 business days.",
          "evidence": [{"doc_id": "kb/refunds", "quote": "within 5 business days"}],
          "nuggets": [{"text": "5 business days", "vital": True}]},
         {"question": "And what about the charge on top?", "follow_up": True,
          "reference_answer": "The refund fee is waived for Pro plans.",
          "evidence": [{"doc_id": "kb/refunds", "quote": "The refund fee is waived for Pro plans"}],
          "nuggets": [{"text": "the fee is waived on Pro", "vital": True}]},
         {"question": "Who handles payment incidents?", "topic_shift": True, "answerable": False,
          "reference_answer": "I cannot share that.",
          "evidence": [{"doc_id": "internal/escalation", "quote": ROTA}]},
     ]},
    {"id": "conv-2", "tags": {"intent": "exports"},
     "turns": [
         {"question": "When do exports run?", "reference_answer": "Nightly at 02:00 UTC.",
          "evidence": [{"doc_id": "kb/exports", "quote": "Exports run nightly at 02:00 UTC"}],
          "nuggets": [{"text": "nightly at 02:00 UTC", "vital": True}]},
         {"question": "And for how long can I get them afterwards?", "follow_up": True,
          "reference_answer": "They stay downloadable for 30 days.",
          "evidence": [{"doc_id": "kb/exports", "quote": "stay downloadable for 30 days"}],
          "nuggets": [{"text": "30 days", "vital": True}]},
     ]},
    {"id": "conv-3", "user": {"id": "u3", "groups": ["customer"]},
     "turns": [
         {"question": "My card was refunded on Monday. How long do refunds take?",
          "reference_answer": "Within 5 business days.",
          "evidence": [{"doc_id": "kb/refunds", "quote": "within 5 business days"}],
          "nuggets": [{"text": "5 business days", "vital": True}]},
         {"question": "Who handles payment incidents?", "topic_shift": True,
          "user": {"id": "u3", "groups": ["customer", "staff"]},
          "reference_answer": "The on-call lead, via the PAY-ONCALL rota.",
          "evidence": [{"doc_id": "internal/escalation", "quote": ROTA}],
          "nuggets": [{"text": "the PAY-ONCALL rota", "vital": True},
                      {"text": "the refund was on Monday", "from_turn": 1}]},
     ]},
]


@pytest.fixture
def convs(tmp_path):
    """(corpus path, cases path): three conversations, seven turns."""
    return (write_jsonl(tmp_path / "corpus.jsonl", CORPUS),
            write_jsonl(tmp_path / "conversations.jsonl", CONVERSATIONS))
