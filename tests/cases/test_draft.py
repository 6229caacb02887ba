"""``raglab cases draft``: sentence numbers become verbatim quotes, every kind is drafted in
its proportion against the local model stand-ins (both wire protocols), unplaceable
evidence and duplicates are dropped and counted, ``--dry-run`` sends nothing, a kind the
corpus cannot give is reported, and ``cases add`` refuses drafts still marked."""

from __future__ import annotations

import json
import random
import re

import pytest

from raglab.cases import draft_corpus as dc
from raglab.data.dataset import load_corpus, resolve_path
from raglab.data.schema import Case, Document, User, may_see
from raglab.text.normalize import normalize
from tests.conftest import TINY_CASES, TINY_CORPUS, run_cli, write_jsonl
from tests.graders.fake_anthropic import (
    bad_request,
    malformed,
    rate_limited,
    server_error,
    user_text,
)
from tests.llm.backends import ANTHROPIC, OPENAI

DEMO_CORPUS = resolve_path("pkg://raglab/datasets/demo/corpus.jsonl")
LINE = re.compile(r"^\[(\d+)\] (.*)$")


# -- a drafter model that answers from the numbered sentences it was sent -------------------

def _sentences(prompt: str) -> list[tuple[int, str, int, str]]:
    """``(number, document letter, section, text)`` of the prompt's numbered sentences."""
    out, doc, section = [], "", 0
    for line in prompt.splitlines():
        m = re.match(r"^Document ([A-Z]) \(", line)
        if m:
            doc, section = m.group(1), 0
        elif line.startswith("## "):
            section += 1
        elif LINE.match(line):
            num, text = LINE.match(line).groups()
            out.append((int(num), doc, section, text))
    return out


def _words(text: str) -> list[str]:
    return [w for w in normalize(text).split() if len(w) > 3]


def fake_drafter(body: dict, invent: bool = False) -> str:
    """The model's JSON: the first sentences that fit the kind asked for, a question made
    of a few of their words, nuggets from them. ``invent``: evidence numbers never shown."""
    prompt = user_text(body)
    if prompt.startswith("Rewrite this test question"):
        q = re.search(r"^Question: (.*)$", prompt, re.M).group(1)
        return json.dumps({"question": "hw does it work for " + q.split()[-1]})
    kind = re.search(r"^Kind: (\w+)\.", prompt, re.M).group(1)
    sents = _sentences(prompt)
    a = [s for s in sents if s[1] == "A"]
    b = [s for s in sents if s[1] == "B"]
    none = {"found": False, "question": "", "reference_answer": "", "evidence": [],
            "nuggets": [], "wrong_value": ""}
    pick, wrong = [a[0]], ""
    if kind == "cross_section":
        other = [s for s in sents if (s[1], s[2]) != (a[0][1], a[0][2])]
        if not other:
            return json.dumps(none)
        pick = [a[0], other[0]]
    elif kind in ("withdrawn_policy", "near_duplicate"):
        b_words = set(_words(" ".join(s[3] for s in b)))
        found = None
        for s in a:  # a sentence of A with a word B lacks, and B's closest sentence
            if set(_words(s[3])) - b_words:
                close = max(b, key=lambda t: len(set(_words(t[3])) & set(_words(s[3]))))
                extra = [w for w in normalize(close[3]).split()
                         if w not in set(normalize(s[3]).split()) and len(w) > 1]
                if extra:
                    found, wrong = s, extra[0]
                    break
        if found is None:
            return json.dumps(none)
        pick = [found]
    elif kind == "counter_common_knowledge":
        digits = [s for s in a if re.search(r"\d", s[3])]
        if not digits:
            return json.dumps(none)
        pick, wrong = [digits[0]], "30 days"
    elif kind == "acl_restricted":
        wrong = normalize(a[0][3]).split()[0]
    words = _words(" ".join(s[3] for s in pick))[:3] or ["it"]
    question = f"what about {' '.join(words)}?"
    nuggets = [{"text": " ".join(s[3].split()[:6]), "vital": i == 0}
               for i, s in enumerate(pick)]
    evidence = [s[0] for s in pick]
    if kind == "unanswerable":
        nuggets, evidence = [], []
        question = f"can i pay {words[0]} in dogecoin?"
    if kind == "acl_restricted":
        nuggets = []
    if invent and evidence:
        evidence = [999]
    return json.dumps({"found": True, "question": question,
                       "reference_answer": "See the documentation.", "evidence": evidence,
                       "nuggets": nuggets, "wrong_value": wrong})


def _rows(path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _draft(tmp_path, backend, srv, *args, out="drafts.jsonl"):
    drafter = ["drafter=openai", f"drafter.base_url={srv.base_url}"] \
        if backend is OPENAI else []
    return run_cli("cases", "draft", f"out={tmp_path / out}", *drafter,
                   f"cache_dir={tmp_path / 'cache'}", *args, cwd=tmp_path,
                   env=backend.env(srv))


# -- known answers -------------------------------------------------------------------------

def test_sentence_numbers_become_verbatim_quotes_with_offsets():
    doc = Document(**TINY_CORPUS[0])
    view = dc.shown([doc], 6000)
    assert view.text.splitlines() == [
        "Document A (kb/a): Refunds", "## Refunds",
        "[1] Refunds are paid back to the original card within 5 business days.",
        "[2] Partial refunds are allowed.", "## Fees",
        "[3] The refund fee is waived for Pro plans."]
    ev = dc.quotes_of(view, [2, 1, 3])
    # 1 and 2 are consecutive in one section: one quote; 3 is under another heading
    assert [(e["quote"], e["start"], e["end"]) for e in ev] == [
        ("Refunds are paid back to the original card within 5 business days. Partial "
         "refunds are allowed.", 12, 107),
        ("The refund fee is waived for Pro plans.", 118, 157)]
    for e in ev:
        assert doc.text[e["start"]:e["end"]] == e["quote"]
    assert dc.sections_of(view, [1, 3]) == {("kb/a", 1), ("kb/a", 2)}
    with pytest.raises(dc.Unplaceable, match="sentence 4 was not shown"):
        dc.quotes_of(view, [1, 4])
    with pytest.raises(dc.Unplaceable):
        dc.quotes_of(view, [])
    with pytest.raises(dc.Unplaceable, match="not in kb/b"):
        dc.quotes_of(view, [1], ["kb/b"])


def test_a_long_document_is_shown_as_a_window_of_whole_sentences():
    text = "\n\n".join(f"## Part {i}\n\nSentence {i} of the manual says {i}." for i in range(40))
    doc = Document(doc_id="big", text=text)
    view = dc.shown([doc], 200, random.Random(3))
    assert 0 < len(view.sentences) < 40
    for s in view.sentences.values():
        assert text[s.start:s.end].startswith("Sentence ")


def test_kinds_are_allocated_in_proportion_and_every_kind_by_default():
    from raglab.cases.draft import KindShares

    shares = KindShares().model_dump()
    assert dc.allocate(7, shares) == dict.fromkeys(dc.KINDS, 1)
    got = dc.allocate(20, shares)
    assert sum(got.values()) == 20 and all(got[k] >= 1 for k in dc.KINDS)
    assert got == {"lookup": 5, "cross_section": 3, "unanswerable": 3, "acl_restricted": 2,
                   "withdrawn_policy": 2, "near_duplicate": 3, "counter_common_knowledge": 2}
    only = dict.fromkeys(dc.KINDS, 0.0) | {"lookup": 3.0, "unanswerable": 1.0}
    assert dc.allocate(8, only) == dict.fromkeys(dc.KINDS, 0) | {"lookup": 6,
                                                                  "unanswerable": 2}


def test_documents_are_sampled_in_turn_from_each_stratum():
    corpus = list(load_corpus(DEMO_CORPUS).values())
    pools, _ = dc.units(corpus, 80.0)
    sources = {d.metadata["source"] for d in corpus}
    assert len(sources) == 5
    got = dc.sample(pools["lookup"], 5, ["source"], random.Random(0))
    assert {u.main.metadata["source"] for u in got} == sources  # one of each source
    got = dc.sample(pools["lookup"], 10, ["source", "product"], random.Random(0))
    strata = {(u.main.metadata["source"], u.main.metadata["product"]) for u in got}
    assert len(strata) == 10
    assert got == dc.sample(pools["lookup"], 10, ["source", "product"], random.Random(0))
    assert len(dc.sample(pools["acl_restricted"], 50, ["source"], random.Random(0))) == 13


def test_the_drafted_outsider_cannot_see_the_restricted_document():
    corpus = list(load_corpus(DEMO_CORPUS).values())
    restricted = [d for d in corpus if d.acl]
    assert len(restricted) == 13
    for d in restricted:
        user = dc.outsider(corpus, d)
        assert not may_see(d.acl, user) and user.groups
    # the ACL of this document holds every group of the corpus: still an outsider
    d = Document(doc_id="x", text="A.", acl=["staff", "customer"])
    assert not may_see(d.acl, dc.outsider([d], d))
    assert may_see(d.acl, dc.insider(d)) and dc.insider(Document(doc_id="y", text="B.")) is None
    assert not may_see(["staff"], User(id="u", groups=["customer"]))


def test_vocabulary_share_of_a_question_in_its_document():
    doc = "Refunds are paid back to the original card within 5 business days."
    assert dc.vocabulary_share("How long do refunds take to reach the card?", [doc]) == 2 / 5
    assert dc.vocabulary_share("refund card days", [doc]) == 1.0
    assert dc.vocabulary_share("how is it?", [doc]) is None


def test_twins_and_superseded_versions_are_told_apart():
    text = ("Card payouts arrive within {} business days of the sale. Payouts are sent to "
            "the bank account set under Settings. Weekends and bank holidays do not count. ")
    eu = Document(doc_id="kb/payouts-eu", text=text.format(2) * 3, metadata={"region": "EU"})
    uk = Document(doc_id="kb/payouts-uk", text=text.format(3) * 3, metadata={"region": "UK"})
    copy = Document(doc_id="kb/payouts-copy", text=eu.text, metadata={"region": "EU"})
    old = Document(doc_id="notes/2025-01", text="Payouts take 5 days.", metadata={})
    new = Document(doc_id="notes/2026-01", text="Payouts take 2 days.", metadata={})
    other = Document(doc_id="kb/other", text="Exports run nightly at 02:00 UTC. " * 5,
                     metadata={"region": "UK"})
    corpus = [eu, uk, copy, old, new, other]
    pairs = {(a.doc_id, b.doc_id) for a, b in dc.twin_pairs(corpus, 80.0)}
    # the twins both ways; not the copy with the same metadata, not two versions of a note
    assert pairs == {("kb/payouts-eu", "kb/payouts-uk"), ("kb/payouts-uk", "kb/payouts-eu"),
                     ("kb/payouts-copy", "kb/payouts-uk"), ("kb/payouts-uk", "kb/payouts-copy")}
    assert [(a.doc_id, b.doc_id) for a, b in dc.superseded_pairs(corpus)] == [
        ("notes/2026-01", "notes/2025-01")]


def test_the_demo_corpus_offers_every_kind():
    corpus = list(load_corpus(DEMO_CORPUS).values())
    pools, why = dc.units(corpus, 80.0)
    assert not why
    assert ("notes/payroll/2026-03-release", "notes/payroll/2025-06-release") in [
        tuple(d.doc_id for d in u.docs) for u in pools["withdrawn_policy"]]
    assert ("kb/ledger/invoice-reminders-eu", "kb/ledger/invoice-reminders-uk") in [
        tuple(d.doc_id for d in u.docs) for u in pools["near_duplicate"]]


# -- the command against the model stand-ins ----------------------------------------------

@pytest.mark.parametrize("backend", [ANTHROPIC, pytest.param(OPENAI, marks=pytest.mark.slow)],
                         ids=lambda b: b.name)
def test_draft_every_kind_with_verbatim_evidence(tmp_path, backend):
    with backend.server(handler=fake_drafter) as srv:
        p = _draft(tmp_path, backend, srv, "n=14", "seed=1")
        assert p.returncode == 0, p.stderr[-3000:]
        sent = len(backend.requests(srv))
        drafts = _rows(tmp_path / "drafts.jsonl")
        paraphrased = sum(1 for d in drafts if "question_before" in d["draft"])
        assert "14 request(s)" in p.stdout.splitlines()[0]
        assert sent >= 14 and f"model: {sent} request(s), 0 cache hit(s)" in p.stdout
        # the same command again: everything from the cache, nothing sent
        p2 = _draft(tmp_path, backend, srv, "n=14", "seed=1", out="again.jsonl")
        assert p2.returncode == 0, p2.stderr[-3000:]
        assert len(backend.requests(srv)) == sent
        assert "14 answered by the cache" in p2.stdout
        assert _rows(tmp_path / "again.jsonl") == drafts
    corpus = load_corpus(DEMO_CORPUS)
    kinds = {d["draft"]["kind"] for d in drafts}
    assert kinds == set(dc.KINDS), p.stdout
    # planned in the default proportions (largest remainder): 14 = 4 + 2 + 2 + 2 + 1 + 2 + 1
    planned = dict(re.findall(r"(\w+) \d+ of (\d+)", p.stdout.split("by kind")[1]
                              .splitlines()[0]))
    assert {k: int(v) for k, v in planned.items()} == {
        "lookup": 4, "cross_section": 2, "unanswerable": 2, "acl_restricted": 2,
        "withdrawn_policy": 1, "near_duplicate": 2, "counter_common_knowledge": 1}
    assert len(drafts) + sum(int(k) for k in re.findall(r" (\d+) \(first:", p.stdout)) == 14
    for d in drafts:
        assert d["needs_review"] is True and d["tags"]["origin"] == "drafted"
        assert d["tags"]["kind"] == d["draft"]["kind"]
        main = corpus[d["draft"]["documents"][0]]
        assert d["tags"]["source"] == main.metadata["source"]
        case = Case.model_validate({k: v for k, v in d.items()
                                    if k not in ("draft", "needs_review")})
        for ev in case.evidence:  # verbatim: the quote is the document's text at its span
            assert corpus[ev.doc_id].text[ev.start:ev.end] == ev.quote
        if case.answerable:
            assert any(n.vital for n in case.nuggets)
        else:
            assert not case.nuggets
        if d["draft"]["kind"] == "acl_restricted":
            assert case.user and not may_see(main.acl, case.user)
            assert case.evidence and all(ev.doc_id == main.doc_id for ev in case.evidence)
        if d["draft"]["kind"] in ("withdrawn_policy", "near_duplicate"):
            other = corpus[d["draft"]["documents"][1]]
            wrong = case.must_not_contain[0]
            assert normalize(wrong.text) in normalize(other.text)
            assert wrong.kind == ("outdated" if d["draft"]["kind"] == "withdrawn_policy"
                                  else "distractor")
    assert re.search(rf"drafts [\d.]+ \({paraphrased} paraphrased\), existing set 0\.\d\d",
                     p.stdout)
    assert paraphrased >= 1 and sent == 14 + paraphrased


def test_dry_run_prints_requests_and_cost_and_sends_nothing(tmp_path):
    from raglab.cases.draft import ClaudeDrafterCfg, estimate, plan

    with ANTHROPIC.server(handler=fake_drafter) as srv:
        p = _draft(tmp_path, ANTHROPIC, srv, "n=10", "--dry-run", "+drafter.prices.input=3",
                   "+drafter.prices.output=15", "drafter.max_tokens=500")
        assert p.returncode == 0, p.stderr
        assert ANTHROPIC.requests(srv) == []
    assert not (tmp_path / "drafts.jsonl").exists()
    corpus = list(load_corpus(DEMO_CORPUS).values())
    cfg = ClaudeDrafterCfg(name="claude", model="claude-sonnet-4-6", max_tokens=500,
                           prices={"input": 3.0, "output": 15.0})
    est = estimate(plan(corpus, cfg, 10, 0), cfg, None)
    words = sum(len((r.request.system + " " + r.request.user).split())
                for r in plan(corpus, cfg, 10, 0).planned)
    assert est["input_tokens"] == words
    expect = (words * 3 + 10 * 500 * 15) / 1e6
    assert "10 request(s) to claude-sonnet-4-6" in p.stdout
    assert f"about {words} input and at most 5000 output tokens: at most ${expect:.4f}" \
        in p.stdout
    assert "dry run: nothing sent" in p.stdout


@pytest.mark.slow
def test_unplaceable_evidence_is_dropped_and_counted(tmp_path):
    with ANTHROPIC.server(handler=lambda body: fake_drafter(body, invent=True)) as srv:
        srv.push(rate_limited(0.05), server_error(), malformed())  # retried, not dropped
        p = _draft(tmp_path, ANTHROPIC, srv, "n=6", "drafter.concurrency=2",
                   "drafter.kinds.lookup=1",
                   "drafter.kinds.cross_section=0", "drafter.kinds.unanswerable=1",
                   "drafter.kinds.acl_restricted=0", "drafter.kinds.withdrawn_policy=0",
                   "drafter.kinds.near_duplicate=0", "drafter.kinds.counter_common_knowledge=0")
        assert 1 <= srv.peak_in_flight <= 2  # at most drafter.concurrency at once
    assert p.returncode == 0, p.stderr
    drafts = _rows(tmp_path / "drafts.jsonl")
    # the lookups cited sentence 999: dropped; the unanswerable ones need no evidence
    assert [d["draft"]["kind"] for d in drafts] == ["unanswerable"] * 3
    assert "dropped 3: evidence not placeable 3 (first: " in p.stdout
    assert "sentence 999 was not shown" in p.stdout


@pytest.mark.slow
def test_duplicates_of_the_set_and_of_other_drafts_are_dropped(tmp_path):
    lookups = ["drafter.kinds.cross_section=0", "drafter.kinds.unanswerable=0",
               "drafter.kinds.acl_restricted=0", "drafter.kinds.withdrawn_policy=0",
               "drafter.kinds.near_duplicate=0", "drafter.kinds.counter_common_knowledge=0",
               "drafter.paraphrase_above=null"]
    corpus = write_jsonl(tmp_path / "corpus.jsonl", TINY_CORPUS + [
        {**TINY_CORPUS[1], "doc_id": "kb/b-copy"}])  # the same text twice: the same question
    cases = write_jsonl(tmp_path / "cases.jsonl", TINY_CASES)
    data = [f"dataset.corpus={corpus}", f"dataset.cases={cases}", "dataset.labels=null"]
    with ANTHROPIC.server(handler=fake_drafter) as srv:
        p = _draft(tmp_path, ANTHROPIC, srv, "n=4", *lookups, *data)
        assert p.returncode == 0, p.stderr
        first = _rows(tmp_path / "drafts.jsonl")
        assert "dropped 1: duplicate question 1" in p.stdout  # kb/b and its copy
        assert len(first) == 3
        # one drafted question is now in the set: drafted again, it is dropped
        # (the same question under other filters is another case: a twin's)
        write_jsonl(cases, TINY_CASES + [
            {"id": "t-x", "question": first[0]["question"].upper(), "answerable": False},
            {"id": "t-y", "question": first[1]["question"], "answerable": False,
             "filters": {"region": "EU"}}])
        p = _draft(tmp_path, ANTHROPIC, srv, "n=4", *lookups, *data, out="d2.jsonl")
        assert p.returncode == 0, p.stderr
        assert "dropped 2: duplicate question 2" in p.stdout and "(as t-x)" in p.stdout
        again = [d["id"] for d in _rows(tmp_path / "d2.jsonl")]
        assert len(again) == 2 and first[1]["id"] in again and first[0]["id"] not in again


@pytest.mark.slow
def test_drafts_of_two_seeds_never_share_an_id(tmp_path):
    """The id hashes the draft's labels and its seed: two seeds drafting the same question
    from the same document give two ids (they used to share one), and ``draft.seed`` and
    ``draft.cases`` say where a draft came from."""
    lookups = ["drafter.kinds.cross_section=0", "drafter.kinds.unanswerable=0",
               "drafter.kinds.acl_restricted=0", "drafter.kinds.withdrawn_policy=0",
               "drafter.kinds.near_duplicate=0", "drafter.kinds.counter_common_knowledge=0",
               "drafter.paraphrase_above=null"]
    corpus = write_jsonl(tmp_path / "corpus.jsonl", TINY_CORPUS)
    cases = write_jsonl(tmp_path / "cases.jsonl", TINY_CASES)
    data = [f"dataset.corpus={corpus}", f"dataset.cases={cases}", "dataset.labels=null"]
    with ANTHROPIC.server(handler=fake_drafter) as srv:
        rows = {}
        for seed in (0, 1):
            p = _draft(tmp_path, ANTHROPIC, srv, "n=3", f"seed={seed}", *lookups, *data,
                       out=f"s{seed}.jsonl")
            assert p.returncode == 0, p.stderr
            rows[seed] = _rows(tmp_path / f"s{seed}.jsonl")
    assert all(d["draft"]["seed"] == seed and d["draft"]["cases"] == str(cases)
               for seed in rows for d in rows[seed])
    labels = lambda d: {k: v for k, v in d.items() if k not in ("id", "draft")}  # noqa: E731
    same = [(a, b) for a in rows[0] for b in rows[1] if labels(a) == labels(b)]
    assert same  # the same labels drafted under both seeds ...
    assert all(a["id"] != b["id"] for a, b in same)  # ... under two ids
    assert not {d["id"] for d in rows[0]} & {d["id"] for d in rows[1]}


def test_the_dropped_line_shows_escapes_escaped(tmp_path):
    """A document id with a terminal escape, named in the dropped-line: shown as ``\\x1b``
    (it reached the terminal raw)."""
    only = ["drafter.kinds.cross_section=0", "drafter.kinds.unanswerable=0",
            "drafter.kinds.acl_restricted=0", "drafter.kinds.withdrawn_policy=0",
            "drafter.kinds.near_duplicate=0", "drafter.kinds.counter_common_knowledge=0"]
    corpus = write_jsonl(tmp_path / "corpus.jsonl", [
        {**d, "doc_id": d["doc_id"] + "\x1b]0;owned\x07\x1b[2J"} for d in TINY_CORPUS])
    cases = write_jsonl(tmp_path / "cases.jsonl", [
        {"id": "t-0", "question": "q?", "answerable": False}])
    data = [f"dataset.corpus={corpus}", f"dataset.cases={cases}", "dataset.labels=null"]
    with ANTHROPIC.server(handler=lambda body: fake_drafter(body, invent=True)) as srv:
        p = _draft(tmp_path, ANTHROPIC, srv, "n=1", *only, *data)
    assert "dropped 1: evidence not placeable 1 (first: kb/" in p.stdout, p.stdout
    assert "\x1b" not in p.stdout and "\x07" not in p.stdout
    assert "\\x1b]0;owned\\x07\\x1b[2J: " in p.stdout


@pytest.mark.slow
def test_a_question_that_copies_its_evidence_is_dropped(tmp_path):
    def copier(body):
        out = json.loads(fake_drafter(body))
        if out["evidence"]:
            n = out["evidence"][0]
            out["question"] = [s[3] for s in _sentences(user_text(body)) if s[0] == n][0]
            out["evidence"] = [n]
        return json.dumps(out)

    corpus = write_jsonl(tmp_path / "corpus.jsonl", TINY_CORPUS)
    cases = write_jsonl(tmp_path / "cases.jsonl", TINY_CASES)
    with ANTHROPIC.server(handler=copier) as srv:
        p = _draft(tmp_path, ANTHROPIC, srv, "n=2", f"dataset.corpus={corpus}",
                   f"dataset.cases={cases}", "drafter.paraphrase_above=null",
                   "drafter.kinds.lookup=1", "drafter.kinds.cross_section=0",
                   "drafter.kinds.unanswerable=0", "drafter.kinds.acl_restricted=0",
                   "drafter.kinds.withdrawn_policy=0", "drafter.kinds.near_duplicate=0",
                   "drafter.kinds.counter_common_knowledge=0")
    assert p.returncode == 0, p.stderr
    assert "dropped 2: question copies its evidence 2" in p.stdout
    assert _rows(tmp_path / "drafts.jsonl") == []


@pytest.mark.slow
def test_a_kind_the_corpus_cannot_give_is_reported_not_made_up(tmp_path):
    corpus = write_jsonl(tmp_path / "corpus.jsonl", TINY_CORPUS[:2])  # no ACL, no twins
    cases = write_jsonl(tmp_path / "cases.jsonl", TINY_CASES[:2])
    with ANTHROPIC.server(handler=fake_drafter) as srv:
        p = _draft(tmp_path, ANTHROPIC, srv, "n=7", f"dataset.corpus={corpus}",
                   f"dataset.cases={cases}")
    assert p.returncode == 0, p.stderr
    assert "corpus lacks acl_restricted: 1 of 1 planned not drafted (no document has an acl)" \
        in p.stdout
    assert "corpus lacks withdrawn_policy: 1 of 1" in p.stdout
    assert "corpus lacks near_duplicate: 1 of 1" in p.stdout
    kinds = {d["draft"]["kind"] for d in _rows(tmp_path / "drafts.jsonl")}
    assert not kinds & {"acl_restricted", "withdrawn_policy", "near_duplicate"}


def test_bad_settings_are_one_line(tmp_path):
    p = run_cli("cases", "draft", "--help", cwd=tmp_path)
    assert p.returncode == 0 and "raglab cases draft [n=N]" in p.stdout
    p = run_cli("cases", "review", cwd=tmp_path)
    assert p.returncode == 2 and "raglab cases review DRAFTS" in p.stderr
    p = run_cli("cases", "draft", "n=zero", "--dry-run", cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.strip() == "raglab: error: n=zero: not a whole number"
    p = run_cli("cases", "draft", "drafter.kinds.lookup=-1", "--dry-run", cwd=tmp_path)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    assert "drafter.kinds.lookup" in p.stderr
    p = run_cli("cases", "draft", "drafter=nope", "--dry-run", cwd=tmp_path)
    assert p.returncode == 2 and "drafter=nope" in p.stderr and "Traceback" not in p.stderr
    env = {k: "" for k in ("ANTHROPIC_API_KEY",)}
    p = run_cli("cases", "draft", "n=1", cwd=tmp_path, env=env)
    assert p.returncode == 2 and "ANTHROPIC_API_KEY" in p.stderr


def test_drafts_of_every_kind_grow_the_demo_set_once_reviewed(tmp_path):
    """draft, then add (refused while marked needs_review), then validate: nothing
    quarantined."""
    cases = tmp_path / "cases.jsonl"
    cases.write_bytes(resolve_path("pkg://raglab/datasets/demo/cases.jsonl").read_bytes())
    data = [f"dataset.cases={cases}", "dataset.labels=null"]
    with ANTHROPIC.server(handler=fake_drafter) as srv:
        p = _draft(tmp_path, ANTHROPIC, srv, "n=7", *data)
    assert p.returncode == 0, p.stderr
    drafts = _rows(tmp_path / "drafts.jsonl")
    assert {d["draft"]["kind"] for d in drafts} == set(dc.KINDS)
    before = cases.read_bytes()
    p = run_cli("cases", "add", str(tmp_path / "drafts.jsonl"), *data, cwd=tmp_path)
    assert p.returncode == 2 and cases.read_bytes() == before
    assert "still marked needs_review" in p.stderr
    p = run_cli("cases", "review", str(tmp_path / "drafts.jsonl"), cwd=tmp_path,
                input_text="a\n" * len(drafts))  # a person accepts every draft
    assert p.returncode == 0, p.stderr
    reviewed = tmp_path / "drafts.accepted.jsonl"
    assert [d["id"] for d in _rows(reviewed)] == [d["id"] for d in drafts]
    assert not any("needs_review" in d for d in _rows(reviewed))
    p = run_cli("cases", "add", str(reviewed), *data, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert f"added {len(drafts)} case(s)" in p.stdout
    p = run_cli("validate", *data, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (tmp_path / "quarantine.jsonl").read_text().strip() == ""


def test_requests_that_fail_are_counted_and_all_failing_is_exit_1(tmp_path):
    only = ["drafter.kinds.cross_section=0", "drafter.kinds.unanswerable=0",
            "drafter.kinds.acl_restricted=0", "drafter.kinds.withdrawn_policy=0",
            "drafter.kinds.near_duplicate=0", "drafter.kinds.counter_common_knowledge=0"]
    with ANTHROPIC.server(handler=fake_drafter) as srv:
        srv.push(bad_request(), bad_request())  # not retried: the request is wrong
        p = _draft(tmp_path, ANTHROPIC, srv, "n=2", *only)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "0 draft(s) of 2 requested" in p.stdout
    assert "dropped 2: model call failed 2" in p.stdout
    assert ANTHROPIC.key not in p.stdout + p.stderr


def test_a_dropped_draft_line_shows_no_part_of_a_key(tmp_path):
    """Issue 37, defect 5: the drafter model repeats the key in a question that is then
    dropped as a duplicate; the dropped-line cut the question at 120 characters before it
    was scrubbed, printing ``Bearer sk-proj-...`` less its last characters. Scrubbed,
    then cut: no piece of the key reaches the terminal or the drafts file."""
    from tests.llm.fake_openai import FakeOpenAI

    key = "sk-proj-" + "Zb7Qw3Nc9Lr5Tx1Hv8Mk4Pd2Js6Fg0Ya" + "Ei5Ou1"

    def echoing(body):
        out = json.loads(fake_drafter(body))
        out["question"] = "what about " + "the refund rules " * 5 + f"(Bearer {key})?"
        return json.dumps(out)

    # two documents of the same region and product: the same question has the same filters
    corpus = write_jsonl(tmp_path / "corpus.jsonl", [TINY_CORPUS[0], TINY_CORPUS[2]])
    cases = write_jsonl(tmp_path / "cases.jsonl", TINY_CASES)
    with FakeOpenAI(handler=echoing) as srv:
        env = {**OPENAI.env(srv), "OPENAI_API_KEY": key}
        p = run_cli("cases", "draft", f"out={tmp_path / 'drafts.jsonl'}", "drafter=openai",
                    f"drafter.base_url={srv.base_url}", f"cache_dir={tmp_path / 'cache'}",
                    "n=2", f"dataset.corpus={corpus}", f"dataset.cases={cases}",
                    "drafter.paraphrase_above=null", "drafter.kinds.lookup=1",
                    *(f"drafter.kinds.{k}=0" for k in dc.KINDS if k != "lookup"),
                    cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr
    assert "dropped 1: duplicate question 1 (first: 'what about the refund rules" in p.stdout
    pieces = [key[i:i + 8] for i in range(len(key) - 7)]
    shown = p.stdout + p.stderr + (tmp_path / "drafts.jsonl").read_text()
    assert [x for x in pieces if x in shown] == []
