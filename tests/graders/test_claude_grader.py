"""The Claude grader against the fake Messages API: prompts, schemas, strict parsing,
per_claim versus batched verification, versioning and caching through the orchestrator
(those two also for grader=openai, against the fake Chat Completions API)."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from raglab import registry
from raglab.cache import StageCache
from raglab.components import BuildContext
from raglab.config import MetricsCfg
from raglab.graders.claude import (
    CLAIM_LABELS,
    DECOMPOSE_SCHEMA,
    NUGGETS_SCHEMA,
    PROMPT_NAMES,
    RELEVANCE_SCHEMA,
    VERIFY_SCHEMA,
    ClaudeGrader,
    ClaudeGraderCfg,
    load_prompts,
    render,
)
from raglab.graders.orchestrate import GraderCallError, Grading
from raglab.graders.spec import family_versions
from raglab.llm.client import LLMClient
from raglab.runner.components import build_grader
from raglab.systems.base import WorkCounter
from tests.graders.fake_anthropic import (
    fake_api,
    fake_env,
    fake_model,
    output,
    system_text,
    user_text,
)
from tests.llm.backends import BACKENDS
from tests.llm.fake_openai import as_messages_body, fake_openai_env

__all__ = ["fake_api"]

MSG = "/v1/messages"
PROMPTS = load_prompts("pkg://raglab/graders/prompts")
PASSAGES = ["Every new Ledger account starts with a default payment term of Net 10. "
            "Invoices are due 10 calendar days after the invoice date.",
            "The default can be changed under Settings > Invoicing > Default payment terms."]


def cfg(**kw) -> ClaudeGraderCfg:
    base = dict(name="claude", model="claude-test", prompts="pkg://raglab/graders/prompts",
                prices={"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.3})
    base.update(kw)
    return registry.entry("grader", base["name"]).config(**base)


@pytest.fixture(params=BACKENDS, ids=lambda b: b.grader)
def model_api(request, monkeypatch):
    """Either backend's fake with the deterministic grader model, its SDK pointed at it:
    ``(backend, server, bodies)``, ``bodies()`` the model calls so far as Messages bodies."""
    be = request.param
    with be.server(handler=fake_model) as srv:
        (fake_openai_env if be.name == "openai" else fake_env)(monkeypatch, srv)

        def bodies():
            return [as_messages_body(c["body"]) if be.name == "openai" else c["body"]
                    for c in be.requests(srv)]

        yield be, srv, bodies


def with_grader(fn, tmp_path=None, prompts=PROMPTS, **cfg_kw):
    """Run ``await fn(grader)`` with a fresh client on a fresh loop."""
    c = cfg(**cfg_kw)

    async def go():
        llm = LLMClient(timeout_s=5, max_retries=1, concurrency=c.concurrency,
                        prices={c.model: c.prices},
                        cache=StageCache(tmp_path) if tmp_path is not None else None)
        g = ClaudeGrader(c, BuildContext(llm=llm, prompts=prompts))
        try:
            return await fn(g)
        finally:
            await g.aclose()
            await llm.aclose()

    return asyncio.run(go())


# -- prompts ----------------------------------------------------------------------------

def test_shipped_prompts_have_system_and_user_parts():
    needs = {"decompose": ("{question}", "{answer}", "{max_claims}"),
             "verify": ("{passages}", "{claims}"),
             "nuggets": ("{question}", "{answer}", "{nuggets}"),
             "relevance": ("{question}", "{answer}")}
    for name in PROMPT_NAMES:
        text = PROMPTS[name]
        assert text.count("=== USER ===\n") == 1, name
        for ph in needs[name]:
            assert ph in text, (name, ph)
    # the shared context sits in the system part (cached), the claims in the user part
    system, user = PROMPTS["verify"].split("=== USER ===")
    assert "{passages}" in system and "{claims}" in user


def test_render_is_one_pass_plain_substitution():
    tpl = "S {passages}\n=== USER ===\nQ: {question} A: {answer} {unknown} {0} {{x}}"
    system, user = render(tpl, {"passages": "P {question}", "question": "why {answer}?",
                                "answer": "{__import__('os')}"})
    assert system == "S P {question}"  # a value's own placeholder is not expanded
    assert user == "Q: why {answer}? A: {__import__('os')} {unknown} {0} {{x}}"
    assert render("no split {question}", {"question": "q"}) == ("", "no split q")


# -- decomposition ----------------------------------------------------------------------

def test_decompose_request_and_result(fake_api):
    fake_api.handler = lambda body: json.dumps({"claims": [
        "The default payment term is Net 10.", "  Invoices are due   10 days after the date. ",
        "", "Extra claim."]})
    claims = with_grader(lambda g: g.decompose("When are invoices due?", "Net 10, so 10 days."),
                         decomposition={"max_claims": 2})
    assert claims == ["The default payment term is Net 10.",
                      "Invoices are due 10 days after the date."]
    body = fake_api.calls(MSG)[0]["body"]
    assert body["output_config"]["format"]["schema"] == DECOMPOSE_SCHEMA
    assert "At most 2 claims" in system_text(body) and "{" not in system_text(body)
    assert "<question>\nWhen are invoices due?\n</question>" in user_text(body)
    assert "<answer>\nNet 10, so 10 days.\n</answer>" in user_text(body)
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}  # static rubric


def test_refusal_has_no_claims(fake_api):
    fake_api.handler = fake_model
    claims = with_grader(lambda g: g.decompose(
        "q?", "I don't know based on the available documents."))
    assert claims == []
    assert with_grader(lambda g: g.decompose("q?", "   ")) == []
    assert len(fake_api.calls(MSG)) == 1  # the blank answer made no call


# -- verification -----------------------------------------------------------------------

CLAIMS = ["Invoices are due 10 calendar days after the invoice date.",
          "The default payment term can be changed under Settings.",
          "Ledger refunds take 30 days."]


def test_verify_batched_is_one_call(fake_api):
    fake_api.handler = fake_model
    res = with_grader(lambda g: g.verify(CLAIMS, PASSAGES, "faithfulness"))
    assert [r[0] for r in res] == ["SUPPORTED", "SUPPORTED", "NOT_FOUND"]
    assert isinstance(res[0][1], str) and res[0][1] in " ".join(PASSAGES)  # the quote
    (call,) = fake_api.calls(MSG)
    body = call["body"]
    assert body["output_config"]["format"]["schema"] == VERIFY_SCHEMA
    assert all(f'<passage index="{i}">' in system_text(body) for i in (1, 2))
    assert len(re.findall(r'<claim index="\d">', user_text(body))) == 3
    item = VERIFY_SCHEMA["properties"]["verdicts"]["items"]["properties"]
    assert list(item) == ["claim_index", "evidence", "reasoning", "label"]  # verdict last
    assert item["label"]["enum"] == list(CLAIM_LABELS)
    assert isinstance(body["system"], str)  # batched: nothing to reuse, no cache write


def test_verify_per_claim_one_call_each_sharing_the_cached_context(fake_api):
    fake_api.handler = fake_model

    async def fn(g):
        res = await g.verify(CLAIMS, PASSAGES, "faithfulness")
        return res, g.llm

    res, llm = with_grader(fn, verification="per_claim", concurrency=1)
    assert [r[0] for r in res] == ["SUPPORTED", "SUPPORTED", "NOT_FOUND"]
    calls = fake_api.calls(MSG)
    assert len(calls) == 3
    systems = {json.dumps(c["body"]["system"]) for c in calls}
    assert len(systems) == 1  # one identical, cacheable system prompt
    assert calls[0]["body"]["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert all(len(re.findall(r"<claim ", user_text(c["body"]))) == 1 for c in calls)
    assert llm.calls == 3


def test_verify_results_follow_claim_index_not_order(fake_api):
    fake_api.handler = lambda body: json.dumps({"verdicts": [
        {"claim_index": 2, "evidence": "", "reasoning": "r", "label": "CONTRADICTED"},
        {"claim_index": 1, "evidence": "Net 10", "reasoning": "r", "label": "SUPPORTED"}]})
    res = with_grader(lambda g: g.verify(CLAIMS[:2], PASSAGES, "faithfulness"))
    # the third element: the passage the evidence quote was taken from
    assert res == [["SUPPORTED", "Net 10", 0], ["CONTRADICTED", None, None]]


def test_a_batch_answered_one_item_at_a_time_is_asked_item_by_item(fake_api):
    """An answer with one verdict for two claims is unusable for the pair: asked again
    once, then each claim alone, whose one-item answer is read."""
    fake_api.handler = lambda body: json.dumps({"verdicts": [
        {"claim_index": 1, "evidence": "", "reasoning": "", "label": "SUPPORTED"}]})
    res = with_grader(lambda g: g.verify(CLAIMS[:2], PASSAGES, "faithfulness"))
    assert res == [["SUPPORTED", None, None], ["SUPPORTED", None, None]]
    calls = fake_api.calls(MSG)
    assert len(calls) == 4 and [len(re.findall(r"<claim ", user_text(c["body"])))
                                for c in calls] == [2, 2, 1, 1]


@pytest.mark.parametrize("bad", [
    {"verdicts": [{"claim_index": 1, "evidence": "", "reasoning": "", "label": "TRUE"},
                  {"claim_index": 2, "evidence": "", "reasoning": "", "label": "SUPPORTED"}]},
    {"verdicts": [{"claim_index": 1, "evidence": "", "reasoning": "", "label": "SUPPORTED"},
                  {"claim_index": 1, "evidence": "", "reasoning": "", "label": "SUPPORTED"}]},
    {"verdicts": [{"claim_index": 1, "evidence": "", "reasoning": "", "label": "SUPPORTED"},
                  {"claim_index": 3, "evidence": "", "reasoning": "", "label": "SUPPORTED"}]},
    {"verdicts": [{"claim_index": 1, "label": "SUPPORTED"}, "nope"]},
    {"answer": "wrong shape"},
])
def test_invalid_structured_output_is_retried_then_an_error(fake_api, bad):
    fake_api.handler = lambda body: json.dumps(bad)
    with pytest.raises(GraderCallError, match="unusable structured output") as e:
        with_grader(lambda g: g.verify(CLAIMS[:2], PASSAGES, "faithfulness"))
    # asked twice for both claims, then twice for each alone; never a guessed verdict
    assert len(fake_api.calls(MSG)) == 6
    assert "2 of 2 items unreadable, asked alone after their batch" in str(e.value)


def test_one_bad_output_then_a_good_one(fake_api):
    fake_api.handler = fake_model
    fake_api.push(output('{"verdicts": []}'))
    res = with_grader(lambda g: g.verify(CLAIMS[:1], PASSAGES, "faithfulness"))
    assert res[0][0] == "SUPPORTED" and len(fake_api.calls(MSG)) == 2


def test_nothing_to_verify_makes_no_call(fake_api):
    assert with_grader(lambda g: g.verify([], PASSAGES, "faithfulness")) == []
    assert with_grader(lambda g: g.verify(CLAIMS[:2], ["", " "], "faithfulness")) == \
        [["NOT_FOUND", None, None], ["NOT_FOUND", None, None]]
    assert fake_api.calls(MSG) == []


# -- nuggets and relevance --------------------------------------------------------------

def test_nuggets(fake_api):
    fake_api.handler = fake_model
    answer = "The default payment term is Net 10, due 10 days after the invoice date."
    res = with_grader(lambda g: g.nuggets("when due?", answer, [
        "The default payment term is Net 10 (due 10 days after the invoice date)",
        "The default payment term is changed in Settings",
        "Refunds are not prorated"]))
    assert [r[0] for r in res] == ["YES", "PARTIAL", "NO"]
    body = fake_api.calls(MSG)[0]["body"]
    assert body["output_config"]["format"]["schema"] == NUGGETS_SCHEMA
    assert with_grader(lambda g: g.nuggets("q", "a", [])) == []


def test_relevance(fake_api):
    fake_api.handler = lambda body: json.dumps({"reasoning": "Asks about X;\n answers Y.",
                                                "label": "DIFFERENT_QUESTION"})
    res = with_grader(lambda g: g.relevance("q?", "a."))
    assert res == ["DIFFERENT_QUESTION", "Asks about X; answers Y."]
    body = fake_api.calls(MSG)[0]["body"]
    assert body["output_config"]["format"]["schema"] == RELEVANCE_SCHEMA
    assert list(RELEVANCE_SCHEMA["properties"]) == ["reasoning", "label"]
    json.dumps(res)  # JSON-serialisable, as the orchestrator caches it


# -- registry, versions and caching through the orchestrator -----------------------------

class _Case:
    id = "c1"
    question = "When are Ledger invoices due by default?"
    answerable = True
    reference_answer = "Invoices are due 10 calendar days after the invoice date (Net 10)."

    class _N:
        def __init__(self, text, vital):
            self.text, self.vital = text, vital

    nuggets = [_N("The default payment term is Net 10", True)]


OUTPUT = {"answer": "Invoices are due 10 calendar days after the invoice date. [1] "
                    "The default payment term is Net 10. [1]",
          "context": [{"doc_id": "d", "text": PASSAGES[0]}],
          "citations": [{"sentence": 0, "context": [0]}, {"sentence": 1, "context": [0]}]}


def _grade(tmp_path, prompts, grader="claude", **cfg_kw):
    c = cfg(name=grader, **cfg_kw)

    class Run:
        grader = c
        concurrency = 2

    versions = family_versions(c, prompts, MetricsCfg())

    async def go():
        llm = LLMClient(timeout_s=5, max_retries=1, concurrency=4, cache=StageCache(tmp_path))
        grader = build_grader(Run(), prompts, llm)
        work = WorkCounter()
        grading = Grading(grader, c.name, versions, StageCache(tmp_path), work)
        verdicts, factual = await grading.grade(_Case(), OUTPUT)
        await llm.aclose()
        return verdicts, factual, work.as_dict()

    return versions, asyncio.run(go())


# the four separate prompts only: every judgment in its own call (the grouped calls are
# tested below against this)
SEPARATE = {k: v for k, v in PROMPTS.items() if k in PROMPT_NAMES}


def test_grading_end_to_end_versioned_and_cached(model_api, tmp_path):
    be, _, bodies = model_api
    v1, (verdicts, factual, work) = _grade(tmp_path, SEPARATE, be.grader)
    assert factual == 2 and not any(v["error"] for v in verdicts)
    fams = {(v["family"], v["kind"]) for v in verdicts}
    assert fams >= {("faithfulness", "decomposition"), ("faithfulness", "claim"),
                    ("correctness", "claim"), ("relevance", "rubric"), ("nuggets", "nugget"),
                    ("citations", "claim")}
    assert all(v["label"] == "SUPPORTED" for v in verdicts
               if v["family"] == "faithfulness" and v["kind"] == "claim")
    n_first = len(bodies())
    # decompose, verify, reference decompose + verify (correctness), relevance, nuggets,
    # and 2 citation checks
    assert n_first == work["grader_calls"] == 8

    # the same again: every judgment from the cache, no HTTP request at all
    v1b, (verdicts2, _, work2) = _grade(tmp_path, SEPARATE, be.grader)
    assert v1b == v1 and len(bodies()) == n_first
    assert work2["grader_calls"] == 0 and work2["grader_cache_hits"] == 8
    assert [v.get("label") for v in verdicts2] == [v.get("label") for v in verdicts]

    # one word of the verify prompt changed: new versions, cache missed, new requests
    changed = dict(SEPARATE, verify=SEPARATE["verify"].replace("strict, careful", "strict"))
    v2, (_, _, work3) = _grade(tmp_path, changed, be.grader)
    for fam in ("faithfulness", "correctness", "citations"):
        assert v2[fam] != v1[fam]
    for fam in ("relevance", "nuggets", "retrieval"):
        assert v2[fam] == v1[fam]
    # the faithfulness version covers the decomposition too, so it is judged again, but its
    # request text did not change: the client's cache answers it without a request
    assert work3["grader_calls"] == 6
    assert len(bodies()) == n_first + 4  # faithfulness, correctness, 2 citations
    new = bodies()[n_first:]
    assert all("You are a strict verifier" in system_text(b) for b in new)


def _by_family(verdicts):
    keep = ("family", "kind", "item", "label", "evidence", "index", "sentence", "passage",
            "vital", "claims")
    return sorted(json.dumps({k: v.get(k) for k in keep}, sort_keys=True) for v in verdicts)


def test_grouped_calls_give_the_separate_calls_verdicts(model_api, tmp_path):
    """Batched mode: claims and cited pairs in one call for the context, reference claims,
    nuggets and relevance in one call for the answer; the same verdicts as one call each."""
    be, _, bodies = model_api
    _, (separate, _, work_sep) = _grade(tmp_path / "a", SEPARATE, be.grader)
    n_sep = len(bodies())
    vg, (grouped, _, work_g) = _grade(tmp_path / "b", PROMPTS, be.grader)
    n_grouped = len(bodies()) - n_sep
    assert _by_family(grouped) == _by_family(separate)
    assert not any(v["error"] for v in grouped)
    # decompose, context, the reference's decomposition, answer (8 calls separately)
    assert (n_sep, n_grouped) == (8, 4) == (work_sep["grader_calls"], work_g["grader_calls"])
    cited = [b for b in bodies()[n_sep:] if "<cited_sentences>" in user_text(b)]
    assert len(cited) == 1 and user_text(cited[0]).count("<sentence index=") == 2


@pytest.mark.parametrize("mode", ["json_object", "text"])
def test_openai_fallback_modes_give_the_json_schema_verdicts(monkeypatch, tmp_path, mode):
    """Known answer: a server without json_schema (JSON mode only, or neither) gives the
    same verdicts through the fallback, under versions of their own."""
    from tests.llm.fake_openai import FakeOpenAI

    with FakeOpenAI(handler=fake_model) as full:
        fake_openai_env(monkeypatch, full)
        v_schema, (expected, _, _) = _grade(tmp_path / "a", PROMPTS, "openai")
    supports = ("json_object",) if mode == "json_object" else ()
    with FakeOpenAI(handler=fake_model, supports=supports) as srv:
        fake_openai_env(monkeypatch, srv)
        v_mode, (got, _, work) = _grade(tmp_path / "b", PROMPTS, "openai",
                                        structured_output=mode)
        assert srv.calls() and all("<json_schema>" in json.dumps(c["body"])
                                   for c in srv.calls())
    assert not any(v["error"] for v in got) and work["grader_calls"] > 0
    assert _by_family(got) == _by_family(expected)
    assert all(v_mode[f] != v_schema[f] for f in ("faithfulness", "nuggets", "relevance"))


def test_grouped_prompt_versions_only_their_families():
    base = family_versions(cfg(), PROMPTS, MetricsCfg())
    sep = family_versions(cfg(), SEPARATE, MetricsCfg())
    assert base["abstention"] == sep["abstention"] and base["retrieval"] == sep["retrieval"]
    for name, fams in (("context", {"faithfulness", "citations"}),
                       ("answer", {"correctness", "nuggets", "relevance"}),
                       ("references", {"correctness"})):
        v = family_versions(cfg(), dict(PROMPTS, **{name: PROMPTS[name] + " "}), MetricsCfg())
        assert {f for f in v if v[f] != base[f]} == fams, name
    # per_claim verification sends no grouped call: the grouped prompts are not in its versions
    pc = cfg(verification="per_claim")
    assert family_versions(pc, PROMPTS, MetricsCfg()) == family_versions(pc, SEPARATE,
                                                                          MetricsCfg())


def test_references_decomposed_several_per_call_and_cached_across_runs(fake_api, tmp_path):
    """The reference answers are decomposed before the cases, several per call, and each
    decomposition is cached per case: a second run (another system, same cases) reuses it."""
    fake_api.handler = fake_model
    c = cfg()
    versions = family_versions(c, PROMPTS, MetricsCfg())

    class Run:
        grader = c
        concurrency = 2

    class Case:
        answerable = True
        nuggets = []

        def __init__(self, i):
            self.id = f"c{i}"
            self.question = f"When are invoices of plan {i} due?"
            self.reference_answer = f"Invoices of plan {i} are due after 10 days."

    cases = [Case(i) for i in range(10)]

    async def go():
        llm = LLMClient(timeout_s=5, max_retries=1, concurrency=4, cache=StageCache(tmp_path))
        work = WorkCounter()
        grading = Grading(build_grader(Run(), PROMPTS, llm), "claude", versions,
                          StageCache(tmp_path), work)
        await grading.prepare(cases)
        await llm.aclose()
        return work.as_dict()

    first = asyncio.run(go())
    calls = [c for c in fake_api.calls(MSG) if "decompositions" in json.dumps(c["body"])]
    assert len(calls) == 2 and first["grader_calls"] == 10  # 8 + 2 references, 10 judgments
    assert asyncio.run(go())["grader_calls"] == 0
