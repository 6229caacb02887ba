"""A decision where the release happens: a decision record (``decision-....json``) as
JUnit XML (every check a test case; failed checks as failures with their reason;
inconclusive ones skipped, saying so and how many cases would settle them), as the GitHub
Actions job summary with one ``::error`` annotation per failed check and one ``::warning``
per inconclusive one, and as a
pull-request comment body that starts with a hidden marker naming the study, so a workflow
updates one comment per study. The user's text in them (slice values, gate and study names)
is shown as the terminal shows it (:func:`raglab.text.escape.term`: control characters and
bidi overrides visible, one line), and escaped by GitHub's rules inside a workflow command.
Pure functions of the record (and the study's name)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from raglab.compare.gates import FAIL, INCONCLUSIVE, NA
from raglab.compare.settling import cases_now
from raglab.text.escape import term, term_lines

#: GitHub's limit on an issue or pull-request comment body, in characters
COMMENT_LIMIT = 65_536
_MARKER = "<!-- raglab-decision: {study} -->"


def _where(r: Mapping[str, Any]) -> str:
    s = r.get("slice")
    return "overall" if not s else f"{s['key']}={s['value']}"


def check_name(r: Mapping[str, Any]) -> str:
    return f"{r['gate']} [{_where(r)}]"


def junit_xml(rec: Mapping[str, Any]) -> str:
    """One ``<testsuite>`` (the gate set) with one ``<testcase>`` per check: a failed check
    is a ``<failure>`` whose message is its reason; an inconclusive check is ``<skipped>``
    with a message that starts ``inconclusive:`` and says how many paired cases would settle
    it (and a ``cases_needed`` property), never a failure; a check that did not apply is
    ``<skipped>`` too."""
    import xml.etree.ElementTree as ET

    results = rec["results"]
    suite = ET.Element("testsuite", {
        "name": f"raglab decide {rec['name']}", "tests": str(len(results)),
        "failures": str(sum(r["status"] == FAIL for r in results)), "errors": "0",
        "skipped": str(sum(r["status"] in (NA, INCONCLUSIVE) for r in results)),
        "timestamp": str(rec.get("written_at") or rec.get("date") or "")})
    props = ET.SubElement(suite, "properties")
    for key, value in (("decision", rec["decision"]), ("gates", rec["gates"]["name"]),
                       ("gates_sha256", rec["gates"].get("sha256") or ""),
                       ("baseline", rec["baseline"]["label"]),
                       ("candidate", rec["candidate"]["label"])):
        ET.SubElement(props, "property", {"name": key, "value": _xml_text(value)})
    for r in results:
        case = ET.SubElement(suite, "testcase", {
            "classname": f"raglab.decide.{rec['gates']['name']}",
            "name": _xml_text(check_name(r))})
        detail = (f"requirement: {r['requirement']}\nreason: {r['reason']}\n"
                  f"n: {r.get('n')}, delta: {r.get('delta')}, interval: "
                  f"[{r.get('ci_low')}, {r.get('ci_high')}]")
        if r["status"] == FAIL:
            f = ET.SubElement(case, "failure", {"message": _xml_text(r["reason"]),
                                                "type": "gate"})
            f.text = _xml_text(detail, lines=True)
        elif r["status"] == INCONCLUSIVE:
            cp = ET.SubElement(case, "properties")
            ET.SubElement(cp, "property", {"name": "status", "value": INCONCLUSIVE})
            ET.SubElement(cp, "property", {"name": "cases_needed",
                                           "value": _xml_text(r.get("cases_needed"))})
            ET.SubElement(case, "skipped", {"message": _xml_text(inconclusive_words(r))})
        elif r["status"] == NA:
            ET.SubElement(case, "skipped", {"message": _xml_text(r["reason"])})
        else:
            ET.SubElement(case, "system-out").text = _xml_text(detail, lines=True)
    ET.indent(suite)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(
        suite, encoding="unicode") + "\n"


def inconclusive_words(r: Mapping[str, Any]) -> str:
    """``inconclusive: N paired cases now; M paired cases would settle it (pass) if the
    change seen held`` of an inconclusive check (labelled pairs on the human scale)."""
    n, unit = cases_now(r)
    need = (f"{r['cases_needed']} {unit} would settle it ({r['settles_as']}) if the "
            f"change seen held" if r.get("cases_needed") is not None
            else f"no number of {unit} settles it if the change seen held")
    return f"inconclusive: {'no' if n is None else n} {unit} now; {need}"


def _xml_text(value: Any, lines: bool = False) -> str:
    """Text XML 1.0 can hold, as the terminal shows it (a report action turns a failure
    into an annotation): control characters and bidi overrides visible (:func:`term`; with
    ``lines`` the line breaks of a several-line text kept), the non-characters U+FFFE and
    U+FFFF dropped."""
    text = term_lines(value) if lines else term(value)
    return text.replace("\ufffe", "").replace("\uffff", "")


def _md(text: Any) -> str:
    from raglab.text.escape import md

    return md(text)


def summary_markdown(rec: Mapping[str, Any], record_name: str | None = None) -> str:
    """The verdict, the failed checks with why, and the gate table's headline columns."""
    from raglab.compare.record import inconclusive_note, verdict_note

    counts = rec["counts"]
    lines = [f"## raglab decide: {rec['decision']} ({_md(rec['name'])})", "",
             f"**{rec['decision']}**: {_md(rec['baseline']['label'])} → "
             f"{_md(rec['candidate']['label'])}, gate set `{_md(rec['gates']['name'])}`; "
             f"{counts['pass']} checks passed, {counts['fail']} failed, "
             f"{counts.get(INCONCLUSIVE, 0)} inconclusive, {counts['n/a']} did not apply."]
    if rec.get("turns_on"):
        lines += ["", _md(verdict_note(rec["turns_on"]))]
    note = inconclusive_note(rec)
    if note:
        lines += ["", _md(note)]
    failed = [r for r in rec["results"] if r["status"] == FAIL]
    if failed:
        lines += ["", "Failed gates:", ""]
        lines += [f"- **{_md(check_name(r))}**: {_md(r['reason'])}" for r in failed]
    open_checks = [r for r in rec["results"] if r["status"] == INCONCLUSIVE]
    if open_checks:
        lines += ["", "Inconclusive gates (what it would take):", ""]
        lines += [f"- **{_md(check_name(r))}**: {_md(inconclusive_words(r))}"
                  for r in open_checks]
    lines += ["", "| gate | slice | baseline | candidate | delta | interval | n | result |",
              "|---|---|---|---|---|---|---|---|"]
    for r in rec["results"]:
        ci = ("n/a" if r.get("ci_low") is None or r.get("ci_high") is None
              else f"[{r['ci_low']:+.3g}, {r['ci_high']:+.3g}]")
        lines.append(f"| {_md(r['gate'])} | {_md(_where(r))} | {_num(r.get('baseline'))} | "
                     f"{_num(r.get('candidate'))} | {_num(r.get('delta'), True)} | {ci} | "
                     f"{r.get('n') if r.get('n') is not None else 'n/a'} | "
                     f"{r['status'].upper()} |")
    if rec.get("warnings"):
        lines += ["", f"{len(rec['warnings'])} warning(s) in the record."]
    if record_name:
        lines += ["", f"Record: `{_md(record_name)}` (.md, .json, .html)."]
    return "\n".join(lines) + "\n"


def _num(x: Any, signed: bool = False) -> str:
    if x is None:
        return "n/a"
    return f"{x:+.4g}" if signed else f"{x:.4g}"


def error_annotations(rec: Mapping[str, Any]) -> list[str]:
    """One GitHub ``::error`` workflow command per failed check and one ``::warning`` per
    inconclusive check (its message says how many cases would settle it), each one line
    whatever a slice value holds (:func:`workflow_data`, :func:`workflow_property`)."""
    out = []
    for r in rec["results"]:
        title = workflow_property(f"raglab decide: {check_name(r)}")
        if r["status"] == FAIL:
            out.append(f"::error title={title}::{workflow_data(r['reason'])}")
        elif r["status"] == INCONCLUSIVE:
            out.append(f"::warning title={title}::{workflow_data(inconclusive_words(r))}")
    return out


def workflow_data(text: Any) -> str:
    """``text`` as the message of a GitHub workflow command: control characters and bidi
    overrides visible as in the terminal (:func:`term`, which leaves no line break, so
    nothing after it can start a command of its own), then GitHub's escapes for data
    (``%`` as ``%25``, CR ``%0D``, LF ``%0A``), so the annotation shows the text as
    written."""
    return term(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def workflow_property(text: Any) -> str:
    """``text`` as a property of a GitHub workflow command (``title=...``):
    :func:`workflow_data`, and ``:`` as ``%3A`` and ``,`` as ``%2C``."""
    return workflow_data(text).replace(":", "%3A").replace(",", "%2C")


def marker(study: str) -> str:
    """The hidden first line of a study's comment (``--`` cannot end an HTML comment; the
    study's name shown as by :func:`term`, so the marker is one line)."""
    return _MARKER.format(study=term(study).replace("--", "- -").replace(">", "&gt;"))


def comment_body(rec: Mapping[str, Any], record_md: str, study: str,
                 limit: int = COMMENT_LIMIT) -> str:
    """The pull-request comment: the marker, the summary, then the full record in a
    collapsed section; cut to ``limit`` characters with a note saying so."""
    head = marker(study) + "\n" + summary_markdown(rec)
    body = (head + "\n<details><summary>The decision record</summary>\n\n" + record_md
            + "\n\n</details>\n")
    if len(body) <= limit:
        return body
    note = ("\n\n</details>\n\n*(cut to fit GitHub's 65,536-character comment limit: the "
            "full record is in the job's artifacts)*\n")
    keep = max(0, limit - len(note))
    cut = body[:keep]
    if "\n" in cut[len(head):]:
        cut = cut[:cut.rindex("\n")]  # at a line end: no half table row
    return cut + note
