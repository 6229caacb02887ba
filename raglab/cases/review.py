"""``raglab cases review DRAFTS``: a person goes through drafted cases one at a time.

Each draft is shown with its question, answer, nuggets, forbidden strings and its evidence
inside its document, the quote marked ``>>>like this<<<``. Keys: ``a`` accept, ``e`` edit
(the case as JSON in ``$VISUAL``/``$EDITOR``; checked against the case schema and the
corpus when the editor closes, offered again when it does not pass), ``r`` reject (with a
reason), ``l`` later, ``q`` quit. After every decision the drafts file is rewritten
(atomically) with the decision in each draft's ``draft.review``, and the accepted drafts,
without ``needs_review``, are written to the accepted file: stopping at any point loses
nothing, and running the command again goes on with the drafts not yet decided (those left
for later come after the unseen ones). Nothing is written before the first decision; the
accepted file may not be the corpus, the dataset's cases or any file holding other cases
than these drafts. One session at a time per drafts file (:mod:`raglab.cases.lock`). An
edited drafted case gets the id of its new labels; ``draft.review.edited_from`` lists the
ids it had.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from raglab.cases.lock import ReviewLock
from raglab.data.conversation import flatten, is_conversation
from raglab.data.dataset import _locate_case, load_corpus
from raglab.data.io import (
    atomic_write_text,
    check_writable_output,
    first_problem,
    iter_json_lines,
    refuse_inputs,
    same_file,
)
from raglab.data.schema import Case, Document
from raglab.errors import UserError
from raglab.text.escape import term
from raglab.text.normalize import locate_quote

DECIDED = ("accepted", "rejected")
KEYS = "[a]ccept  [e]dit  [r]eject  [l]ater  [q]uit > "
NOTES = ("draft", "needs_review")


def _file_name(case_id: str) -> str:
    """A case id as the name of the file the editor opens: a ``/``, a control character or
    a name too long for the file system would leave it unwritten (a traceback)."""
    name = re.sub(r"[^\w.-]+", "-", case_id).strip(".-")[:60]
    return name or "draft"


def _status(d: dict[str, Any]) -> str | None:
    return ((d.get("draft") or {}).get("review") or {}).get("status")


class Review:
    def __init__(self, path: Path, accepted: Path, corpus: dict[str, Document]):
        self.path, self.accepted, self.corpus = path, accepted, corpus
        self.drafts: list[dict[str, Any]] = []
        for lineno, obj in iter_json_lines(path, "drafts file"):
            if not isinstance(obj.get("id"), str):
                raise UserError("not a draft (no id)", file=str(path), line=lineno)
            self.drafts.append(obj)
        self.fancy = sys.stdout.isatty()

    # -- saving --------------------------------------------------------------------------
    def save(self) -> None:
        """The drafts with their decisions, then the accepted ones (each file atomic)."""
        atomic_write_text(self.path, "".join(json.dumps(d, ensure_ascii=False) + "\n"
                                             for d in self.drafts))
        ok = [{k: v for k, v in d.items() if k != "needs_review"}
              for d in self.drafts if _status(d) == "accepted"]
        atomic_write_text(self.accepted, "".join(json.dumps(d, ensure_ascii=False) + "\n"
                                                 for d in ok))

    def decide(self, d: dict[str, Any], status: str, reason: str | None = None) -> None:
        note = d.setdefault("draft", {})
        review = dict(note.get("review") or {})
        review.update(status=status, at=datetime.now(UTC).isoformat(timespec="seconds"))
        if reason is not None:
            review["reason"] = reason
        note["review"] = review
        if status == "accepted":
            d.pop("needs_review", None)
        else:
            d["needs_review"] = True
        self.save()

    # -- showing -------------------------------------------------------------------------
    def _mark(self, text: str) -> str:
        return f"\033[7m>>>{text}<<<\033[0m" if self.fancy else f">>>{text}<<<"

    def _in_document(self, ev: dict[str, Any], width: int, around: int = 280) -> list[str]:
        doc = self.corpus.get(str(ev.get("doc_id")))
        head = f"  in {term(ev.get('doc_id'))}"
        if doc is None:
            return [head + ": (document not in the corpus)", f"    {term(repr(ev.get('quote')))}"]
        start, end = ev.get("start"), ev.get("end")
        quote = ev.get("quote")
        if not (isinstance(start, int) and isinstance(end, int)
                and (quote is None or doc.text[start:end] == quote)):
            loc = locate_quote(quote or "", doc.text)
            if loc is None:
                return [head + ": (quote not found in the document)",
                        f"    {term(repr(quote))}"]
            start, end = loc.start, loc.end
        a, b = max(0, start - around), min(len(doc.text), end + around)
        before = ("..." if a else "") + term(" ".join(doc.text[a:start].split()))
        after = term(" ".join(doc.text[end:b].split())) + ("..." if b < len(doc.text) else "")
        sep = "" if after[:1] in tuple(".,;:!?)") else " "
        body = f"{before} {self._mark(term(' '.join(doc.text[start:end].split())))}{sep}{after}"
        body = body.strip()
        lines = [head + (f" ({term(doc.title)})" if doc.title else "")
                 + (f", acl {term(doc.acl)}" if doc.acl else "")]
        return lines + textwrap.wrap(body, width - 4, initial_indent="    ",
                                     subsequent_indent="    ", break_on_hyphens=False)

    def show(self, d: dict[str, Any], pos: int, total: int) -> None:
        width = max(60, min(shutil.get_terminal_size((100, 40)).columns, 120))
        note = d.get("draft") or {}
        counts = {s: sum(1 for x in self.drafts if _status(x) == s)
                  for s in ("accepted", "rejected", "later")}
        out = []
        if self.fancy:
            out.append("\033[2J\033[H")
        out.append(f"draft {pos} of {total} this session: {term(d['id'])}  "
                   f"kind {term(note.get('kind'))}"
                   f"  ({counts['accepted']} accepted, {counts['rejected']} rejected, "
                   f"{counts['later']} later)")
        wrap = lambda label, text: textwrap.wrap(  # noqa: E731
            f"{label}{term(text)}", width, subsequent_indent=" " * len(label))
        turns = d.get("turns") if isinstance(d.get("turns"), list) else None
        for k, t in enumerate(turns or [d], start=1):
            if turns is not None:  # a conversation: each turn, with what it inherits
                marks = [m for m in ("follow_up", "topic_shift") if t.get(m)]
                out.append(f"-- turn {k} of {len(turns)}"
                           + (f" ({', '.join(marks)})" if marks else "") + " --")
                t = {"filters": d.get("filters"), "user": d.get("user"), **t}
            out += self._case_lines(t, width, wrap)
        others = [x for x in note.get("documents") or []
                  if x not in {e.get("doc_id") for e in d.get("evidence") or []}]
        for m in d.get("must_not_contain") or []:
            text = m.get("text") if isinstance(m, dict) else m
            for doc_id in others:  # the old or twin value, where it comes from
                if doc_id in self.corpus and text and locate_quote(
                        text, self.corpus[doc_id].text, 100.0) is not None:
                    out.append(f"must not contain {term(repr(text))}, from the other "
                               "document:")
                    out += self._in_document({"doc_id": doc_id, "quote": text}, width)
        if note.get("closest"):
            out.append("closest sentences (not evidence):")
            for ev in note["closest"]:
                out += self._in_document(ev, width)
        if note.get("question_before"):
            out += wrap("paraphrased from: ", note["question_before"])
        review = note.get("review") or {}
        if review.get("edited"):
            out.append("(edited)")
        print("\n".join(out), flush=True)

    def _case_lines(self, d: dict[str, Any], width: int, wrap: Any) -> list[str]:
        """A case's (or a turn's) question, labels and evidence in its documents."""
        out: list[str] = []
        out += wrap("question: ", d.get("question"))
        if d.get("filters"):
            out.append(f"filters:  {term(json.dumps(d['filters']))}")
        if d.get("user"):
            out.append(f"user:     {term(json.dumps(d['user']))}")
        out.append(f"answerable: {'yes' if d.get('answerable', True) else 'no'}")
        out += wrap("answer:   ", d.get("reference_answer") or "(none)")
        for n in d.get("nuggets") or []:
            out += wrap("  nugget " + ("(vital) " if n.get("vital") else "(extra) ")
                        + (f"(from turn {n['from_turn']}) " if n.get("from_turn") else ""),
                        n.get("text"))
        for m in d.get("must_not_contain") or []:
            text, kind = (m.get("text"), m.get("kind")) if isinstance(m, dict) else (m, None)
            out.append(f"  must not contain ({term(kind or 'any')}): {term(repr(text))}")
        out.append(f"evidence ({len(d.get('evidence') or [])}):")
        for ev in d.get("evidence") or []:
            out += self._in_document(ev, width)
        return out

    # -- editing -------------------------------------------------------------------------
    def check(self, obj: Any) -> str | None:
        """The one-line problem of an edited case (None: it passes); offsets of an edited
        quote are found again in its document."""
        if not isinstance(obj, dict):
            return "not a JSON object"
        plain = {k: v for k, v in obj.items() if k not in NOTES}
        if is_conversation(plain):  # each turn as a case: its schema, then its quotes
            try:
                flatten(plain, file="draft", line=1)
                for k, t in enumerate(plain["turns"], start=1):
                    problem = self._place_quotes(t)
                    if problem:
                        return f"{plain['id']}.t{k}: {problem}"
                cases = flatten(plain, file="draft", line=1)  # with the quotes' offsets
            except UserError as e:
                return f"{e.case_id}: {e.message}" if e.case_id else e.message
        else:
            try:
                Case.model_validate(plain)
            except ValidationError as e:
                p = first_problem(e, Case, data=obj)
                return f"{p.loc}: {p.msg}" if p.loc else p.msg
            problem = self._place_quotes(obj)
            if problem:
                return problem
            cases = [Case.model_validate({k: v for k, v in obj.items() if k not in NOTES})]
        for case in cases:
            _, found = _locate_case(case, self.corpus, 90.0)
            where = f"{case.id}: " if case.conversation is not None else ""
            if found is not None:
                return where + str(getattr(found, "reason", found))
            if case.answerable and not case.evidence and not any(
                    n.from_turn for n in case.nuggets):
                return where + "an answerable case needs evidence"
        return None

    def _place_quotes(self, obj: dict[str, Any]) -> str | None:
        """Offsets of each edited quote found again in its document (a problem: None)."""
        for i, ev in enumerate(obj.get("evidence") or []):
            doc = self.corpus.get(str(ev.get("doc_id"))) if isinstance(ev, dict) else None
            if doc is None or not ev.get("quote"):
                continue
            if doc.text[ev.get("start") or 0:ev.get("end") or 0] != ev["quote"]:
                loc = locate_quote(ev["quote"], doc.text)
                if loc is None:
                    return f"evidence {i}: quote not found in document '{doc.doc_id}'"
                ev["start"], ev["end"] = loc.start, loc.end
        return None

    def edit(self, d: dict[str, Any]) -> bool:
        """Edit ``d`` in the editor until it passes or the edit is dropped; True if changed."""
        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
        text = json.dumps({k: v for k, v in d.items() if k not in NOTES}, indent=2,
                          ensure_ascii=False) + "\n"
        with tempfile.TemporaryDirectory(prefix="raglab-review-") as tmp:
            path = Path(tmp) / f"{_file_name(d['id'])}.json"
            path.write_text(text, encoding="utf-8")
            while True:
                done = subprocess.run([*shlex.split(editor), str(path)], check=False)
                if done.returncode != 0:
                    print(f"the editor exited with {done.returncode}: edit dropped")
                    return False
                try:
                    obj = json.loads(path.read_text(encoding="utf-8"))
                    problem = self.check(obj)
                except ValueError as e:
                    problem = f"not JSON: {' '.join(str(e).split())}"
                if problem is None:
                    break
                print(f"not saved: {term(problem)}")
                if read_key("[e]dit again  [d]rop the edit > ") != "e":
                    return False
        old_id = d["id"]
        d.update({k: v for k, v in obj.items() if k not in NOTES})
        for k in [k for k in d if k not in obj and k not in NOTES]:
            d.pop(k)
        note = d.setdefault("draft", {})
        review = {**(note.get("review") or {}), "edited": True}
        if note.get("from") == "corpus" and d["id"] == old_id \
                and old_id.startswith("drafted-"):  # a drafted case's id follows its labels
            from raglab.cases.draft import draft_id

            seed = note.get("seed")
            new_id = draft_id(d, seed if isinstance(seed, int) else 0)
            if new_id != old_id and new_id not in {x["id"] for x in self.drafts}:
                d["id"] = new_id
                review["edited_from"] = [*(review.get("edited_from") or []), old_id]
        note["review"] = review
        self.save()
        return True

    # -- the session ---------------------------------------------------------------------
    def run(self) -> int:
        todo = [d for d in self.drafts if _status(d) is None]
        todo += [d for d in self.drafts if _status(d) == "later"]
        if not todo:
            print(f"nothing to review in {self.path}: every draft is decided")
            if not self.accepted.exists():
                self.save()
            return 0
        pos = 0
        quit_ = False
        while pos < len(todo) and not quit_:
            d = todo[pos]
            self.show(d, pos + 1, len(todo))
            key = read_key(KEYS)
            if key == "a":
                self.decide(d, "accepted")
            elif key == "r":
                reason = read_line("reason: ").strip()
                if not reason:
                    print("a rejection needs a reason")
                    continue
                self.decide(d, "rejected", reason)
            elif key == "l":
                self.decide(d, "later")
            elif key == "e":
                self.edit(d)
                continue
            elif key == "q":
                quit_ = True
                continue
            else:
                continue
            pos += 1
        counts = {s: sum(1 for x in self.drafts if _status(x) == s)
                  for s in ("accepted", "rejected", "later")}
        left = sum(1 for x in self.drafts if _status(x) is None)
        print(f"{counts['accepted']} accepted, {counts['rejected']} rejected, "
              f"{counts['later']} later, {left} not yet seen; progress saved in {self.path}; "
              f"accepted drafts in {self.accepted} (raglab cases add {self.accepted})")
        return 0


def read_key(prompt: str) -> str:
    """One key (no Enter needed on a terminal); ``q`` at the end of the input."""
    print(prompt, end="", flush=True)
    if sys.stdin.isatty():
        import termios
        import tty

        fd = sys.stdin.fileno()
        old = termios.tcgetattr(fd)
        try:
            tty.setcbreak(fd)
            ch = sys.stdin.read(1)
        finally:
            termios.tcsetattr(fd, termios.TCSADRAIN, old)
        print(ch if ch.isprintable() else "", flush=True)
        return ch.lower() if ch != "\x04" else "q"
    line = sys.stdin.readline()
    return line.strip()[:1].lower() if line else "q"


def read_line(prompt: str) -> str:
    try:
        return input(prompt)
    except EOFError:
        return ""


def review(path: Path, accepted: Path, corpus_path: Path | None) -> int:
    """The review session of the drafts file ``path`` (exit code), under its lock."""
    if not path.is_file():
        raise UserError(f"{path}: no such drafts file")
    if same_file(accepted, path):
        raise UserError(f"--accepted {accepted}: that is the drafts file itself")
    with ReviewLock(path):  # read under the lock: a session before this one has ended
        session = Review(path, accepted, {})
        if corpus_path is None:
            named = {str((d.get("draft") or {}).get("corpus")) for d in session.drafts
                     if (d.get("draft") or {}).get("corpus")}
            if len(named) > 1:
                raise UserError(f"{path}: drafts of {len(named)} corpora; name one with "
                                "--corpus")
            corpus_path = Path(named.pop()) if named else None
        if corpus_path is None:
            raise UserError(f"{path}: its drafts name no corpus; name it with --corpus FILE")
        _check_accepted(session, accepted, corpus_path)
        session.corpus = load_corpus(corpus_path)
        try:
            return session.run()
        except KeyboardInterrupt:
            print(f"\nstopped; every decision so far is saved in {path}")
            return 0


def _check_accepted(session: Review, accepted: Path, corpus_path: Path) -> None:
    """Refuse an accepted file that is one of the dataset's own files (the corpus, the cases
    the drafts were checked against) or that holds anything but drafts of this file: it is
    rewritten with the accepted drafts at every decision."""
    named = {(corpus_path, "the corpus")}
    for d in session.drafts:
        note = d.get("draft") or {}
        for key, what in (("corpus", "the corpus"), ("cases", "the dataset's cases")):
            if isinstance(note.get(key), str) and note[key]:
                named.add((Path(note[key]), what))
    refuse_inputs(accepted, sorted(named, key=str), f"--accepted {accepted}",
                  "name another file for the accepted drafts")
    if not accepted.exists():
        return
    check_writable_output(accepted)
    ours = {d["id"] for d in session.drafts}
    for d in session.drafts:
        ours.update(((d.get("draft") or {}).get("review") or {}).get("edited_from") or [])
    for lineno, obj in iter_json_lines(accepted, "accepted file") \
            if accepted.stat().st_size else ():
        if obj.get("id") not in ours:
            raise UserError(f"--accepted {accepted}: it holds a case that is not a draft of "
                            f"{session.path} (line {lineno}, id {term(obj.get('id'))}); it "
                            "would be overwritten: name another file for the accepted drafts")
