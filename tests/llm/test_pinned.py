"""Moving the Anthropic calls behind the backend interface changes no verdict and no metric
version of an existing Claude run: the values below were computed before the move."""

from __future__ import annotations

from raglab.config import MetricsCfg
from raglab.graders.claude import ClaudeGraderCfg, load_prompts
from raglab.graders.prompting import VERIFY_SCHEMA
from raglab.graders.spec import family_versions
from raglab.llm.client import LLMRequest
from tests.test_configs import _compose as compose_run

PRICES = {"input": 3.0, "output": 15.0, "cache_write": 3.75, "cache_read": 0.30}
BATCHED = {"retrieval": "7242e823e9fe", "faithfulness": "5805fa6e7490",
           "citations": "24f15d4ca1b5", "correctness": "086dc9e98658",
           "relevance": "9be307aab570", "nuggets": "b6c1f6c190d3", "abstention": "a1cbb7d3f2e0"}
PER_CLAIM = {"retrieval": "7242e823e9fe", "faithfulness": "c71544cd71cd",
             "citations": "08b15d98a92a", "correctness": "d5c2a7811eaf",
             "relevance": "019e7c8549c7", "nuggets": "7c1a41103a70", "abstention": "d5f78a6e9022"}


def _cfg(**kw) -> ClaudeGraderCfg:
    return ClaudeGraderCfg(name="claude", model="claude-sonnet-4-6",
                           prompts="pkg://raglab/graders/prompts", **kw)


def test_claude_grader_versions_are_unchanged():
    prompts = load_prompts("pkg://raglab/graders/prompts")
    assert family_versions(_cfg(prices=PRICES), prompts, MetricsCfg()) == BATCHED
    assert family_versions(_cfg(verification="per_claim"), prompts, MetricsCfg()) == PER_CLAIM


def test_claude_grader_versions_from_the_shipped_config():
    cfg = compose_run(["grader=claude"])
    prompts = load_prompts(cfg.grader.prompts)
    # the shipped metrics config has its own retrieval settings
    assert family_versions(cfg.grader, prompts, cfg.metrics) == {**BATCHED,
                                                                 "retrieval": "abebc0d4ca72"}


def test_anthropic_request_cache_keys_are_unchanged():
    r = LLMRequest(model="claude-sonnet-4-6", system="sys", user="u", max_tokens=64,
                   schema=VERIFY_SCHEMA, cache_system=True)
    assert r.cache_key() == "2783a615d5618a3141ef9bdebdb306ee0e8390121766711955c9b917fe41c8f4"
    g = LLMRequest(model="m", system="s", user="u", max_tokens=8, repeat=2, purpose="generate")
    assert g.cache_key() == "e287d48335dbeae0134cd23df8edc6a82b6f4dc9a60b585960d09ee8c757d624"


def test_anthropic_generator_config_is_unchanged():
    """The generation stage's cache key hashes the generator's config (less its prices)."""
    cfg = compose_run(["generator=anthropic"])
    assert cfg.generator.model_dump(exclude={"prices"}) == {
        "name": "anthropic", "model": "claude-sonnet-4-6", "max_tokens": 512,
        "timeout_s": 60.0, "max_retries": 4,
        "refusal": "I don't know based on the available documents."}
