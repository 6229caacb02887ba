import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
pytest_plugins = ["pytester"]  # the pytest plugin's tests (tests/compare/test_ci_handover.py)


def run_cli(*args: str, cwd: Path, env: dict | None = None, timeout: float = 300,
            input_text: str | None = None) -> subprocess.CompletedProcess:
    """Run the real ``raglab`` CLI in a subprocess."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "raglab.cli", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout, input=input_text)


def default_sigint() -> None:
    """``preexec_fn`` of a child that a test interrupts: a test suite started in the
    background (SIGINT ignored, inherited across exec) must still be able to Ctrl-C it."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


TINY_CORPUS = [
    {"doc_id": "kb/a", "title": "Refunds",
     "text": "## Refunds\n\nRefunds are paid back to the original card within 5 business days. "
             "Partial refunds are allowed.\n\n## Fees\n\nThe refund fee is waived for Pro plans.",
     "metadata": {"region": "EU", "product": "pro"}},
    {"doc_id": "kb/b", "title": "Exports",
     "text": "Exports run nightly at 02:00 UTC. You can download CSV or PDF exports from "
             "the Reports page.",
     "metadata": {"region": "US", "product": "pro"}},
    {"doc_id": "internal/c", "title": "Escalation",
     "text": "Escalate payment incidents to the on-call lead via the PAY-ONCALL rota.",
     "metadata": {"region": "EU", "product": "pro"}, "acl": ["staff"]},
]

TINY_CASES = [
    {"id": "t-1", "question": "How long do refunds take to reach the card?",
     "reference_answer": "Within 5 business days.",
     "evidence": [{"doc_id": "kb/a",
                   "quote": "paid back to the original card within 5 business days", "grade": 2}],
     "nuggets": [{"text": "5 business days", "vital": True}],
     "tags": {"intent": "refunds", "source": "kb"}},
    {"id": "t-2", "question": "When do exports run?",
     "reference_answer": "Nightly at 02:00 UTC.",
     "evidence": [{"doc_id": "kb/b", "quote": "Exports run nightly at 02:00 UTC"}],
     "nuggets": [{"text": "nightly at 02:00 UTC", "vital": True}],
     "tags": {"intent": "exports", "source": "kb"}},
    {"id": "t-3", "question": "Who do I escalate payment incidents to?",
     "user": {"id": "u1", "groups": ["customer"]}, "answerable": False,
     "tags": {"intent": "support", "source": "none"}},
    {"id": "t-4", "question": "What is the escalation rota for payment incidents?",
     "user": {"id": "u2", "groups": ["staff"]},
     "reference_answer": "The PAY-ONCALL rota.",
     "evidence": [{"doc_id": "internal/c", "quote": "on-call lead via the PAY-ONCALL rota"}],
     "nuggets": [{"text": "PAY-ONCALL rota", "vital": True}],
     "tags": {"intent": "support", "source": "policy"}},
]


@pytest.fixture
def tiny(tmp_path):
    """A tiny dataset: (corpus path, cases path)."""
    return (write_jsonl(tmp_path / "corpus.jsonl", TINY_CORPUS),
            write_jsonl(tmp_path / "cases.jsonl", TINY_CASES))


@pytest.fixture
def demo_subset(tmp_path):
    """Overrides for the demo corpus with its first 30 cases (keeps sweep tests quick)."""
    from raglab.data.dataset import resolve_path

    cases = resolve_path("pkg://raglab/datasets/demo/cases.jsonl").read_text().splitlines()[:30]
    path = tmp_path / "cases30.jsonl"
    path.write_text("\n".join(cases) + "\n")
    return ["dataset.cases=" + str(path), "dataset.labels=null"]


@pytest.fixture(autouse=True)
def _tracking_uri_left_as_found():
    """``mlflow.set_tracking_uri`` in a test sets MLFLOW_TRACKING_URI in this process's
    environment (for subprocesses, MLflow says), where the tests after it would read it:
    each test leaves the tracking URI as it found it."""
    before = os.environ.get("MLFLOW_TRACKING_URI")
    yield
    if os.environ.get("MLFLOW_TRACKING_URI") == before:
        return
    if "mlflow" in sys.modules:
        import mlflow

        mlflow.set_tracking_uri(before)  # None: MLflow's default, and the variable unset
    if before is None:
        os.environ.pop("MLFLOW_TRACKING_URI", None)
    else:
        os.environ["MLFLOW_TRACKING_URI"] = before
