"""The figures of a calibration and their renderings (terminal table, calibration.md).

Per kind (claims: SUPPORTED / CONTRADICTED / NOT_FOUND; nuggets: YES / PARTIAL / NO, an
ordered scale, so also quadratic-weighted kappa): Cohen's kappa of the grader against the
human labels, accuracy, per-label precision and recall, the confusion matrix (rows human,
columns grader) and leniency (claims: SUPPORTED where people said NOT_FOUND or
CONTRADICTED; nuggets: YES where people said NO), each with a seeded bootstrap 95%
interval. With repeats, the grader's label of an item is the most frequent one over its
repeats (a tie goes to the first repeat's label), and self-consistency is Fleiss' kappa
across repeats plus the share of items where every repeat agrees.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from raglab.calibration.labels import LabelLine
from raglab.data.schema import CLAIM_LABELS, NUGGET_LABELS
from raglab.stats.agreement import agreement_summary, all_agree_share, fleiss_kappa

KINDS = {"claims": ("claim", CLAIM_LABELS, (["NOT_FOUND", "CONTRADICTED"], "SUPPORTED"), False),
         "nuggets": ("nugget", NUGGET_LABELS, (["NO"], "YES"), True)}


def majority(votes: Sequence[str | None]) -> str | None:
    got = [v for v in votes if v is not None]
    if not got:
        return None
    counts = Counter(got)
    top = max(counts.values())
    return got[0] if counts[got[0]] == top else next(v for v in got if counts[v] == top)


def summarise(labels: list[LabelLine], judged: list[list[str | None]], *, repeats: int,
              independent: int, seed: int, n_resamples: int) -> dict[str, Any]:
    """The ``claims``, ``nuggets``, ``self_consistency`` and ``items`` of calibration.json."""
    items = []
    for ll, votes in zip(labels, judged):
        lab = ll.label
        item: dict[str, Any] = {"case_id": lab.case_id, "kind": lab.kind, "line": ll.line,
                                "item": lab.item, "human": lab.label,
                                "grader": majority(votes)}
        if independent > 1:
            item["repeats"] = list(votes)
        items.append(item)
    out: dict[str, Any] = {}
    consistency: dict[str, Any] = {"repeats": repeats, "independent": independent}
    for section, (kind, names, lenient, weighted) in KINDS.items():
        rows = [(it, v) for it, v in zip(items, judged) if it["kind"] == kind]
        ok = [(it, v) for it, v in rows if it["grader"] is not None]
        code = {n: i for i, n in enumerate(names)}
        s = agreement_summary([code[it["human"]] for it, _ in ok],
                              [code[it["grader"]] for it, _ in ok], names, weighted=weighted,
                              lenient=lenient, seed=seed, n_resamples=n_resamples)
        # the one-sided 95% lower bound: the 5th percentile of the same (seeded) bootstrap,
        # the lower end of its two-sided 90% interval
        s["kappa_lcb"] = agreement_summary(
            [code[it["human"]] for it, _ in ok], [code[it["grader"]] for it, _ in ok], names,
            seed=seed, n_resamples=n_resamples, level=0.90)["ci_low"]
        s["errors"] = len(rows) - len(ok)
        out[section] = s
        full = [v for _, v in ok if all(x is not None for x in v)]
        if independent > 1 and full:
            table = [[sum(1 for x in v if x == n) for n in names] for v in full]
            consistency[section] = {"fleiss_kappa": fleiss_kappa(table),
                                    "all_agree": all_agree_share(table), "n": len(full)}
        else:  # one judgment per item (or a deterministic grader): repeats cannot disagree
            consistency[section] = {"fleiss_kappa": 1.0 if full else None,
                                    "all_agree": 1.0 if full else None, "n": len(full)}
    out["self_consistency"] = consistency
    out["items"] = items
    return out


# ---- renderings ------------------------------------------------------------------------
def _f(x: float | None, nd: int = 3) -> str:
    return "n/a" if x is None else f"{x:.{nd}f}"


def _ci(lo: float | None, hi: float | None) -> str:
    return "[n/a]" if lo is None or hi is None else f"[{lo:.3f}, {hi:.3f}]"


def _est(e: dict | None) -> str:
    if not e or e.get("value") is None:
        return "n/a"
    return f"{e['value']:.3f} {_ci(e['ci_low'], e['ci_high'])}"


def confusion_lines(section: dict[str, Any], indent: str = "  ") -> list[str]:
    names = section["confusion"]["labels"]
    w = max(len(n) for n in names) + 2
    lines = [indent + "human \\ grader".ljust(w + 4) + "".join(n.rjust(w) for n in names)]
    for name, row in zip(names, section["confusion"]["counts"]):
        lines.append(indent + name.ljust(w + 4) + "".join(str(c).rjust(w) for c in row))
    return lines


def terminal_table(result: dict[str, Any]) -> str:
    lines = [f"{'':9} {'n':>4}  {'kappa':>6} {'95% CI':<17} {'weighted kappa':<24} "
             f"{'accuracy':<23} leniency"]
    for section in KINDS:
        s = result[section]
        wk = _est(s.get("weighted_kappa")) if "weighted_kappa" in s else "-"
        lines.append(f"{section:9} {s['n']:>4}  {_f(s['kappa']):>6} "
                     f"{_ci(s['ci_low'], s['ci_high']):<17} {wk:<24} "
                     f"{_est(s['accuracy']):<23} {_est(s['leniency'])}")
    sc = result["self_consistency"]
    if sc["independent"] > 1:
        parts = [f"{sec} Fleiss kappa {_f(sc[sec]['fleiss_kappa'])}, all agree "
                 f"{_f(sc[sec]['all_agree'])}" for sec in KINDS]
        lines.append(f"self-consistency over {sc['independent']} repeats: " + "; ".join(parts))
    elif sc["repeats"] > 1:
        lines.append(f"self-consistency: a deterministic grader, asked once for "
                     f"{sc['repeats']} repeats: agreement 1.0")
    for section in KINDS:
        lines.append(f"{section} confusion (rows human, columns grader):")
        lines += confusion_lines(result[section])
    return "\n".join(lines)


def markdown(doc: dict[str, Any]) -> str:
    """calibration.md: every figure of calibration.json except the items."""
    lab = doc["labels"]
    lines = [f"# Calibration of grader `{doc['grader']}`", "",
             f"- labels: `{lab['path']}` ({lab['n']} labels, sha256 `{lab['sha256'][:16]}`)",
             *([f"- from dataset `{d['name']}` ({d['n_cases']} cases, cases sha256 "
                f"`{str(d['cases_sha256'])[:16]}`)"] if (d := doc.get("dataset")) else []),
             f"- repeats: {doc['repeats']} (independent judgments per item: "
             f"{doc['self_consistency']['independent']})",
             f"- bootstrap: {doc['claims']['bootstrap']['resamples']} resamples, seed "
             f"{doc['claims']['bootstrap']['seed']}, percentile 95% intervals",
             "- metric versions: " + ", ".join(f"{k} `{v}`" for k, v in doc["versions"].items()),
             ""]
    for section in KINDS:
        s = doc[section]
        lines += [f"## {section.capitalize()}", "",
                  f"- n = {s['n']} (grader errors: {s['errors']})",
                  f"- Cohen's kappa: {_f(s['kappa'])} {_ci(s['ci_low'], s['ci_high'])}; "
                  f"one-sided 95% lower bound {_f(s.get('kappa_lcb'))} (what min_kappa "
                  "compares)"]
        if "weighted_kappa" in s:
            lines.append(f"- quadratic-weighted kappa: {_est(s['weighted_kappa'])}")
        len_ = s["leniency"]
        lines += [f"- accuracy: {_est(s['accuracy'])}",
                  f"- leniency (grader {len_['grader']} where people said "
                  f"{' or '.join(len_['human'])}; n = {len_['n']}): {_est(len_)}", "",
                  "| label | support | precision | recall |", "|---|---:|---|---|"]
        for name, pl in s["per_label"].items():
            lines.append(f"| {name} | {pl['support']} | {_est(pl['precision'])} | "
                         f"{_est(pl['recall'])} |")
        names = s["confusion"]["labels"]
        lines += ["", "Confusion matrix (rows human, columns grader):", "",
                  "| human \\ grader | " + " | ".join(names) + " |",
                  "|---|" + "---:|" * len(names)]
        for name, row in zip(names, s["confusion"]["counts"]):
            lines.append(f"| {name} | " + " | ".join(str(c) for c in row) + " |")
        lines.append("")
    sc = doc["self_consistency"]
    lines += ["## Self-consistency", ""]
    for section in KINDS:
        c = sc[section]
        lines.append(f"- {section}: Fleiss' kappa {_f(c['fleiss_kappa'])}, all repeats agree "
                     f"{_f(c['all_agree'])} (n = {c['n']})")
    return "\n".join(lines) + "\n"
