"""raglab's pytest plugin (entry point ``pytest11``): a team's own ``pytest`` gates a
release like any test.

The fixture ``raglab_decide`` runs ``raglab decide`` (a real subprocess, as in CI) and
returns a :class:`Decision`; ``assert_go(decision)`` (or ``decision.assert_go()``) fails
the test on NO-GO with a message that lists every failed gate and why, and on INCONCLUSIVE
with a message that lists every check not shown and how many paired cases would settle it::

    from raglab.pytest_plugin import assert_go

    def test_release(raglab_decide):
        decision = raglab_decide("runs/main", "runs/pr", gates="default")
        assert_go(decision)

A team that ships when no gate is breached, though some could not be shown on its cases,
says so: ``assert_go(decision, accept_inconclusive=True)`` fails on NO-GO only.

The standard library and raglab's text escaper only: loading the plugin imports nothing
heavy."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from raglab.text.escape import term


@dataclass
class Decision:
    """One decision: ``decision`` (``GO``, ``NO-GO`` or ``INCONCLUSIVE``), the exit code
    (0, 1 or 4), the record (the decision JSON) and where it was written."""

    decision: str
    exit_code: int
    record: dict[str, Any] = field(repr=False)
    path: Path
    output: str = field(repr=False, default="")

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.record.get("results", []) if r.get("status") == "fail"]

    @property
    def inconclusive(self) -> list[dict[str, Any]]:
        return [r for r in self.record.get("results", [])
                if r.get("status") == "inconclusive"]

    def failure_message(self) -> str:
        """The gates that failed (and those not shown), one line each: the record's text
        shown as the terminal shows it (control characters and bidi overrides visible, a
        line break in a slice value too), so nothing from the data starts a line."""
        rec = self.record
        head = (f"raglab decide: {self.decision} ({rec['baseline']['label']} -> "
                f"{rec['candidate']['label']}, gates {rec['gates']['name']})")
        lines = [head + ("; failed gates:" if self.failed else "")]
        for r in self.failed:
            lines.append(f"  - {r['gate']} [{_where(r)}]: {r['reason']}")
        if self.inconclusive:
            lines.append("  not shown either way (inconclusive; accept with "
                         "assert_go(decision, accept_inconclusive=True)):")
            for r in self.inconclusive:
                unit = r.get("cases_unit") or "paired cases"
                need = (f"{r['cases_needed']} {unit} would settle it"
                        if r.get("cases_needed") is not None
                        else f"no number of {unit} settles it")
                now = (r.get("human_scale") or {}).get("labelled_pairs") \
                    if unit != "paired cases" else r.get("n")
                lines.append(f"  - {r['gate']} [{_where(r)}]: {now} {unit} now; "
                             f"{need} if the change seen held")
        if not self.failed and not self.inconclusive:
            lines.append("  (none failed: no gate check passed, so nothing showed a GO)")
        lines.append(f"record: {self.path}")
        return "\n".join(term(line) for line in lines)

    def assert_go(self, accept_inconclusive: bool = False) -> None:
        ok = ("GO", "INCONCLUSIVE") if accept_inconclusive else ("GO",)
        if self.decision not in ok:
            raise AssertionError(self.failure_message())


def _where(r: dict[str, Any]) -> str:
    s = r.get("slice")
    return "overall" if not s else f"{s['key']}={s['value']}"


def assert_go(decision: Decision, accept_inconclusive: bool = False) -> None:
    """Fail with the failed (and inconclusive) gates listed unless the decision is GO, or,
    with ``accept_inconclusive=True``, GO or INCONCLUSIVE."""
    __tracebackhide__ = True
    decision.assert_go(accept_inconclusive)


def _decide(study_root: Path, baseline: str | Path, candidate: str | Path,
            gates: str = "default", *extra: str, study: str | Path | None = None,
            cwd: str | Path | None = None) -> Decision:
    folder = Path(study) if study is not None else study_root
    if cwd is not None and not folder.is_absolute():
        folder = Path(cwd) / folder      # where `raglab decide --study` writes it, run in cwd
    folder.mkdir(parents=True, exist_ok=True)
    before = set(folder.glob("decision-*.json"))
    proc = subprocess.run(
        [sys.executable, "-m", "raglab.cli", "decide", str(baseline), str(candidate),
         f"gates={gates}", "--study", str(folder), *extra],
        capture_output=True, text=True, cwd=cwd)
    if proc.returncode not in (0, 1, 4):
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
