"""raglab's pytest plugin (entry point ``pytest11``): a team's own ``pytest`` gates a
release like any test.

The fixture ``raglab_decide`` runs ``raglab decide`` (a real subprocess, as in CI) and
returns a :class:`Decision`; ``assert_go(decision)`` (or ``decision.assert_go()``) fails
the test on NO-GO with a message that lists every failed gate and why::

    from raglab.pytest_plugin import assert_go

    def test_release(raglab_decide):
        decision = raglab_decide("runs/main", "runs/pr", gates="default")
        assert_go(decision)

Standard library only: loading the plugin imports nothing heavy."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest


@dataclass
class Decision:
    """One decision: ``decision`` (``GO``/``NO-GO``), the exit code, the record (the
    decision JSON) and where it was written."""

    decision: str
    exit_code: int
    record: dict[str, Any] = field(repr=False)
    path: Path
    output: str = field(repr=False, default="")

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.record.get("results", []) if r.get("status") == "fail"]

    def failure_message(self) -> str:
        rec = self.record
        lines = [f"raglab decide: {self.decision} ({rec['baseline']['label']} -> "
                 f"{rec['candidate']['label']}, gates {rec['gates']['name']}); failed gates:"]
        for r in self.failed:
            s = r.get("slice")
            where = "overall" if not s else f"{s['key']}={s['value']}"
            lines.append(f"  - {r['gate']} [{where}]: {r['reason']}")
        if not self.failed:
            lines.append("  (none failed: no gate check passed, so nothing showed a GO)")
        lines.append(f"record: {self.path}")
        return "\n".join(lines)

    def assert_go(self) -> None:
        if self.decision != "GO":
            raise AssertionError(self.failure_message())


def assert_go(decision: Decision) -> None:
    """Fail with the failed gates listed unless the decision is GO."""
    __tracebackhide__ = True
    decision.assert_go()


def _decide(study_root: Path, baseline: str | Path, candidate: str | Path,
            gates: str = "default", *extra: str, study: str | Path | None = None,
            cwd: str | Path | None = None) -> Decision:
    folder = Path(study) if study is not None else study_root
    folder.mkdir(parents=True, exist_ok=True)
    before = set(folder.glob("decision-*.json"))
    proc = subprocess.run(
        [sys.executable, "-m", "raglab.cli", "decide", str(baseline), str(candidate),
         f"gates={gates}", "--study", str(folder), *extra],
        capture_output=True, text=True, cwd=cwd)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"raglab decide exited {proc.returncode}: "
                           f"{proc.stderr.strip() or proc.stdout.strip()}")
    (path,) = set(folder.glob("decision-*.json")) - before
    record = json.loads(path.read_text(encoding="utf-8"))
    return Decision(record["decision"], proc.returncode, record, path, proc.stdout)


@pytest.fixture
def raglab_decide(tmp_path: Path):
    """``raglab_decide(BASELINE, CANDIDATE, gates="default", *options, study=DIR,
    cwd=DIR)``: run ``raglab decide`` and return the :class:`Decision` (the record goes to
    ``study``, by default a temporary folder of the test)."""
    def run(baseline: str | Path, candidate: str | Path, gates: str = "default",
            *extra: str, study: str | Path | None = None,
            cwd: str | Path | None = None) -> Decision:
        return _decide(tmp_path / "decision", baseline, candidate, gates, *extra,
                       study=study, cwd=cwd)

    return run
