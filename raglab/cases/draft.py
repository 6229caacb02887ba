"""``raglab cases draft``: cases drafted by a model from the corpus, for a person to review.

The plan (:func:`plan`) samples documents for each kind of case (:mod:`.draft_corpus`) in
the configured proportions, stratified by metadata; each planned draft is one request
through the one LLM client (cached, priced, retried, at most ``concurrency`` at once). A
draft whose evidence cannot be placed, that does not meet its kind, or that duplicates a
case or another draft is dropped and counted; a kind the corpus cannot give is counted as
missing, never made up. Every draft is a case plus ``needs_review: true`` and ``draft``
(where it came from; ignored by ``raglab cases add``). With ``--follow-ups N`` each
answerable draft is also asked for N follow-up turns and written as a conversation
(:mod:`.draft_follow`).
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field, ValidationError

from raglab.cache import content_key
from raglab.cases import draft_corpus as dc
from raglab.cases import draft_follow as df
from raglab.cases import draft_prompts as dp
from raglab.data.schema import Case, Document, Strict
from raglab.llm.backends.openai import OpenAIOptions, endpoint_of, options_of
from raglab.llm.client import LLMCallError, LLMRequest
from raglab.secrets import clip, clip_line
from raglab.text.normalize import count_tokens, normalize


class KindShares(Strict):
    """The share of each kind among the drafts (normalised to their sum; 0 leaves a kind
    out; when ``n`` allows, every kind with a share gets at least one)."""

    lookup: float = Field(0.25, ge=0)
    cross_section: float = Field(0.15, ge=0)
    unanswerable: float = Field(0.15, ge=0)
    acl_restricted: float = Field(0.1, ge=0)
    withdrawn_policy: float = Field(0.1, ge=0)
    near_duplicate: float = Field(0.15, ge=0)
    counter_common_knowledge: float = Field(0.1, ge=0)


class DrafterCfg(Strict):
    """``drafter=claude|openai``: the model and the LLM client settings of the graders', and
    what to draft."""

    name: str
    model: str = Field(min_length=1)
    max_tokens: int = Field(1024, gt=0)
    concurrency: int = Field(4, ge=1, description="requests in flight at most")
    timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(5, ge=0, description="transport retries of one request")
    prices: dict[str, float] = Field(default_factory=dict, description=(
        "USD per million tokens (input, output, cache_write, cache_read): cost accounting "
        "and the --dry-run estimate"))
    kinds: KindShares = Field(default_factory=KindShares)
    stratify: list[str] = Field(default_factory=lambda: ["source"], description=(
        "metadata keys: documents are picked in turn from the groups of their values"))
    max_doc_chars: int = Field(6000, gt=0, description=(
        "a longer document is shown as a window of whole sentences (a section)"))
    twin_similarity: float = Field(80.0, ge=0, le=100, description=(
        "near-duplicate twins: rapidfuzz ratio of two documents' texts at least this"))
    paraphrase_above: float | None = Field(0.8, ge=0, le=1, description=(
        "a second request asks for a paraphrase when more than this share of the "
        "question's content words are in its evidence documents (null: never)"))
    near_copy: float = Field(85.0, ge=0, le=100, description=(
        "a question this close (rapidfuzz ratio) to one of its quotes is dropped"))


class ClaudeDrafterCfg(DrafterCfg):
    name: Literal["claude"]


class OpenAIDrafterCfg(OpenAIOptions, DrafterCfg):
    name: Literal["openai"]


BACKEND = {"claude": "anthropic", "openai": "openai"}


def parse_drafter(data: Any) -> DrafterCfg:
    from raglab.config import parse_section
    from raglab.errors import ConfigError

    name = data.get("name") if isinstance(data, dict) else None
    models: dict[str, type[DrafterCfg]] = {"claude": ClaudeDrafterCfg,
                                           "openai": OpenAIDrafterCfg}
    model = models.get(str(name))
    if model is None:
        raise ConfigError(f"config drafter.name: unknown drafter {name!r} (valid: claude, "
                          "openai)")
    return parse_section(model, data, "drafter")


@dataclass
class Planned:
    """One request of the plan."""

    index: int
    unit: dc.Unit
    view: dc.Shown
    request: LLMRequest


@dataclass
class Plan:
    planned: list[Planned]
    wanted: dict[str, int]
    missing: dict[str, tuple[int, str]]  # kind -> (drafts the corpus could not give, why)
    seed: int = 0


def routing(cfg: DrafterCfg) -> dict[str, Any]:
    if isinstance(cfg, OpenAIDrafterCfg):
        return {"backend": "openai", "options": options_of(cfg), "endpoint": endpoint_of(cfg)}
    return {"backend": BACKEND[cfg.name]}


def _metadata(docs: tuple[Document, ...]) -> str:
    return "; ".join(f"Document {chr(65 + i)}: " + ", ".join(
        f"{k}={v}" for k, v in sorted(d.metadata.items())) for i, d in enumerate(docs))


def plan(corpus: list[Document], cfg: DrafterCfg, n: int, seed: int) -> Plan:
    """The requests of ``n`` drafts: deterministic for a seed."""
    rng = random.Random(seed)
    pools, why = dc.units(corpus, cfg.twin_similarity)
    wanted = dc.allocate(n, cfg.kinds.model_dump())
    planned: list[Planned] = []
    missing: dict[str, tuple[int, str]] = {}
    for kind in dc.KINDS:
        picked = dc.sample(pools[kind], wanted[kind], cfg.stratify, rng)
        if len(picked) < wanted[kind]:
            missing[kind] = (wanted[kind] - len(picked), why.get(kind) or (
                f"the corpus has {len(pools[kind])} such document(s) or pair(s)"))
        for unit in picked:
            view = dc.shown(list(unit.docs), cfg.max_doc_chars, rng)
            user = dp.USER.format(task=dp.KIND_TASK[kind], metadata=_metadata(unit.docs),
                                  documents=view.text)
            req = LLMRequest(model=cfg.model, system=dp.SYSTEM, user=user,
                             max_tokens=cfg.max_tokens, purpose="draft",
                             schema=dp.DRAFT_SCHEMA, **routing(cfg))
            planned.append(Planned(len(planned), unit, view, req))
    return Plan(planned, wanted, missing, seed)


def estimate(p: Plan, cfg: DrafterCfg, cache: Any, follow_ups: int = 0) -> dict[str, Any]:
    """What the plan would send: requests, how many the cache already answers, tokens
    (input counted as words; output at most ``max_tokens``) and the most it can cost; the
    paraphrase and follow-up requests that may follow (one per draft at most each)."""
    todo = [x for x in p.planned
            if cache is None or cache.get("llm", x.request.cache_key()) is None]
    tokens_in = sum(count_tokens(x.request.system) + count_tokens(x.request.user)
                    for x in todo)
    tokens_out = len(todo) * cfg.max_tokens
    cost = None
    if "input" in cfg.prices and "output" in cfg.prices:
        cost = (tokens_in * cfg.prices["input"] + tokens_out * cfg.prices["output"]) / 1e6
    return {"requests": len(p.planned), "cached": len(p.planned) - len(todo),
            "input_tokens": tokens_in, "max_output_tokens": tokens_out, "max_cost_usd": cost,
            "paraphrase_at_most": len(p.planned) if cfg.paraphrase_above is not None else 0,
            "follow_ups_at_most": len(p.planned) if follow_ups else 0,
            # each asks for follow_ups turns, with max_tokens for each
            "follow_ups_max_output_tokens": len(p.planned) * follow_ups * cfg.max_tokens}


@dataclass
class Outcome:
    drafts: list[dict[str, Any]] = field(default_factory=list)
    dropped: Counter = field(default_factory=Counter)
    first_drop: dict[str, str] = field(default_factory=dict)
    paraphrased: int = 0  # drafts written with a paraphrased question
    conversations: int = 0  # drafts written as conversations (--follow-ups)
    follow_ups: int = 0  # their follow-up turns

    def drop(self, reason: str, detail: str) -> None:
        self.dropped[reason] += 1
        self.first_drop.setdefault(reason, detail)


def _tags(kind: str, doc: Document) -> dict[str, str]:
    tags = {k: str(v) for k, v in doc.metadata.items()
            if isinstance(v, str | int | float | bool) and k != "answerable"}
    return {**tags, "origin": "drafted", "kind": kind}


def build_case(item: Planned, parsed: dict, corpus: list[Document]) -> dict[str, Any]:
    """The draft of one structured output; :class:`~.draft_corpus.Unplaceable` or
    ValueError (with the reason) when it cannot be one."""
    unit, view, kind = item.unit, item.view, item.unit.kind
    main = unit.main
    if not parsed.get("found"):
        raise _Drop("the model found no such question", "the model found none")
    question = " ".join(str(parsed.get("question", "")).split())
    if not question:
        raise _Drop("no question", "invalid draft")
    nums = list(parsed.get("evidence") or [])
    case: dict[str, Any] = {"id": "", "question": question, "filters": {},
                            "reference_answer": parsed.get("reference_answer") or None,
                            "evidence": [], "nuggets": [], "answerable": True,
                            "tags": _tags(kind, main), "must_not_contain": []}
    wrong = " ".join(str(parsed.get("wrong_value") or "").split())
    if kind == "unanswerable":
        case["answerable"] = False
        if nums:  # the closest sentences: shown to the reviewer, not gold evidence
            case["_closest"] = dc.quotes_of(view, nums)
        user = dc.insider(main)
        if user is not None:
            case["user"] = user.model_dump()
        return case
    evidence = dc.quotes_of(view, nums, [main.doc_id] if kind != "cross_section" else None)
    case["evidence"] = evidence
    if kind == "acl_restricted":
        case["answerable"] = False
        case["user"] = dc.outsider(corpus, main).model_dump()
        if wrong and _in(wrong, [e["quote"] for e in evidence]):
            case["must_not_contain"] = [{"text": wrong, "kind": "secret"}]
        return case
    if kind == "cross_section" and len(dc.sections_of(view, nums)) < 2:
        raise _Drop("the evidence is in one section only", "kind not met")
    if kind in ("withdrawn_policy", "near_duplicate"):
        other = unit.docs[1]
        if not wrong or not _in(wrong, [other.text]):
            raise dc.Unplaceable(f"wrong_value {clip(wrong, 60)!r} is not in {other.doc_id}")
        if _in(wrong, [e["quote"] for e in evidence]):
            raise _Drop("the old or twin value is also in the evidence", "kind not met")
        case["must_not_contain"] = [{"text": wrong, "kind": "outdated"
                                     if kind == "withdrawn_policy" else "distractor"}]
        if kind == "near_duplicate":
            case["filters"] = {k: v for k, v in main.metadata.items()
                               if other.metadata.get(k) != v
                               and isinstance(v, str | int | float | bool)}
    if kind == "counter_common_knowledge" and wrong and not _in(
            wrong, [e["quote"] for e in evidence]):
        case["must_not_contain"] = [{"text": wrong, "kind": "distractor"}]
    user = dc.insider(main)
    if user is not None:
        case["user"] = user.model_dump()
    nuggets = [{"text": " ".join(n["text"].split()), "vital": bool(n.get("vital"))}
               for n in parsed.get("nuggets") or [] if str(n.get("text", "")).strip()]
    if not any(n["vital"] for n in nuggets):
        raise _Drop("no vital nugget", "invalid draft")
    case["nuggets"] = nuggets
    return case


class _Drop(ValueError):
    def __init__(self, detail: str, reason: str):
        super().__init__(detail)
        self.reason = reason


def _in(needle: str, texts: list[str]) -> bool:
    n = normalize(needle)
    return bool(n) and any(f" {n} " in f" {normalize(t)} " for t in texts)


#: the fields of a draft its id is made of (its labels; not the review notes)
ID_FIELDS = ("question", "filters", "user", "reference_answer", "evidence", "nuggets",
             "answerable", "tags", "must_not_contain")


def draft_id(case: dict[str, Any], seed: int) -> str:
    """``drafted-`` and a hash of the draft's labels and the seed it was drafted with: two
    seeds never share an id, and an edited draft gets a new one (docs/cases.md)."""
    return "drafted-" + content_key({k: case.get(k) for k in ID_FIELDS}, seed, length=10)


async def _ask(llm: Any, item: Planned) -> tuple[Planned, dict | None, str | None]:
    try:
        resp = await llm.complete(item.request, dp.check_draft)
        return item, resp.parsed, None
    except LLMCallError as e:
        return item, None, str(e)


async def _paraphrase(llm: Any, cfg: DrafterCfg, case: dict[str, Any],
                      docs: list[str]) -> dict | None:
    from raglab.text.lexical import content_terms

    seen = {t for text in docs for t in content_terms(text)}
    words = sorted({w for w in normalize(case["question"]).split()
                    if content_terms(w) and content_terms(w)[0] in seen})
    user = dp.PARAPHRASE.format(words=", ".join(words), question=case["question"],
                                answer=case.get("reference_answer") or "")
    req = LLMRequest(model=cfg.model, system=dp.SYSTEM, user=user, max_tokens=256,
                     purpose="draft", schema=dp.PARAPHRASE_SCHEMA, **routing(cfg))
    try:
        return (await llm.complete(req, dp.check_paraphrase)).parsed
    except LLMCallError:
        return None


async def run_plan(p: Plan, cfg: DrafterCfg, corpus: list[Document], llm: Any,
                   existing: list[Case], corpus_path: str,
                   cases_path: str | None = None, follow_ups: int = 0) -> Outcome:
    """Send the plan, read every answer back, paraphrase, drop duplicates (in plan order);
    with ``follow_ups``, ask that many follow-up turns of each answerable draft
    (:mod:`.draft_follow`)."""
    from rapidfuzz import fuzz

    out = Outcome()
    answers = await asyncio.gather(*(_ask(llm, x) for x in p.planned))
    # (normalised question, filters) -> case id: twins ask one question under two filters
    known = {(normalize(c.question), _filters(c.filters)): c.id for c in existing}
    built: list[tuple[Planned, dict[str, Any]]] = []
    for item, parsed, error in answers:
        if error is not None:
            out.drop("model call failed", error)
            continue
        try:
            case = build_case(item, parsed or {}, corpus)
        except _Drop as e:
            out.drop(e.reason, f"{item.unit.main.doc_id}: {e}")
            continue
        except dc.Unplaceable as e:
            out.drop("evidence not placeable", f"{item.unit.main.doc_id}: {e}")
            continue
        built.append((item, case))

    async def vocab(item: Planned, case: dict[str, Any]) -> None:
        texts = [d.text for d in item.unit.docs]
        share = dc.vocabulary_share(case["question"], texts)
        note: dict[str, Any] = {"vocabulary_share": share}
        if share is not None and cfg.paraphrase_above is not None \
                and share > cfg.paraphrase_above:
            got = await _paraphrase(llm, cfg, case, texts)
            new = " ".join(str((got or {}).get("question", "")).split())
            if new:
                note.update(question_before=case["question"], vocabulary_share_before=share,
                            vocabulary_share=dc.vocabulary_share(new, texts))
                case["question"] = new
        case["_note"] = note

    await asyncio.gather(*(vocab(i, c) for i, c in built))
    for item, case in built:
        note = case.pop("_note")
        if "_closest" in case:
            note["closest"] = case.pop("_closest")
        key = (normalize(case["question"]), _filters(case["filters"]))
        if key in known:
            out.drop("duplicate question", f"{case['question']!r} (as {known[key]})")
            continue
        near = next((k for k in known if k[1] == key[1] and fuzz.ratio(key[0], k[0]) >= 95),
                    None)
        if near is not None:
            out.drop("duplicate question", f"{case['question']!r} (near {known[near]})")
            continue
        if any(fuzz.ratio(key[0], normalize(e["quote"])) >= cfg.near_copy
               for e in case["evidence"]):
            out.drop("question copies its evidence", case["question"])
            continue
        case["id"] = draft_id(case, p.seed)
        try:
            Case.model_validate(case)
        except ValidationError as e:
            out.drop("invalid draft", f"{case['id']}: {clip_line(e, 200)}")
            continue
        known[key] = case["id"]
        case["needs_review"] = True
        case["draft"] = {"from": "corpus", "kind": item.unit.kind, "corpus": corpus_path,
                         "documents": [d.doc_id for d in item.unit.docs],
                         "model": cfg.model, "seed": p.seed, **note}
        if cases_path is not None:
            case["draft"]["cases"] = cases_path
        out.drafts.append(case)
        out.paraphrased += "question_before" in note
    if follow_ups and out.drafts:
        out.drafts, drops, out.follow_ups = await df.add_follow_ups(
            out.drafts, corpus, cfg, routing(cfg), llm, follow_ups, p.seed)
        for reason, detail in drops:
            out.drop(reason, detail)
        out.conversations = sum(1 for d in out.drafts if "turns" in d)
    return out


def _filters(filters: dict[str, Any] | None) -> str:
    return json.dumps(filters or {}, sort_keys=True)


def existing_share(cases: list[Case], corpus: dict[str, Document]) -> float | None:
    """The mean vocabulary share of the set's cases with evidence (their evidence
    documents), None when none has any."""
    shares = []
    for c in cases:
        docs = [corpus[e.doc_id].text for e in c.evidence if e.doc_id in corpus]
        s = dc.vocabulary_share(c.question, docs) if docs else None
        if s is not None:
            shares.append(s)
    return sum(shares) / len(shares) if shares else None
