"""``raglab cases draft|review``: cases drafted from the corpus, and a person's review."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from raglab.commands.common import fail
from raglab.secrets import clip_line

HELP = """usage: raglab cases draft [n=N] [out=FILE] [seed=S] [--dry-run] [--follow-ups N]
                         [drafter=claude|openai] [drafter.FIELD=VALUE ...] [dataset overrides]
       raglab cases review DRAFTS [--accepted FILE] [--corpus FILE]

draft   samples documents of dataset.corpus (stratified by drafter.stratify) for each kind
        of case in the proportions of drafter.kinds (lookup, cross_section, unanswerable,
        acl_restricted, withdrawn_policy, near_duplicate, counter_common_knowledge) and
        asks the drafter model for one case each; evidence is chosen by sentence number
        and copied from the document. Drafts whose evidence cannot be placed, that miss
        their kind or duplicate a case are dropped and counted. Writes out (default
        drafts.jsonl), each draft marked needs_review. --dry-run prints the requests and
        their estimated cost and sends nothing. --follow-ups N (1-19) asks, for each
        answerable draft, for N follow-up turns answered in its document or a linked one
        (one more request per draft) and writes the draft and the follow-ups that could
        be placed as a conversation (follow_up: true on turns 2..); a follow-up whose
        evidence cannot be placed is dropped and counted, with the ones after it.
        Defaults: n=20 seed=0 drafter=claude.
review  one draft at a time: a accept, e edit (in $EDITOR), r reject (with a reason),
        l later, q quit. Progress is saved in DRAFTS after every decision; accepted
        drafts (needs_review removed) go to --accepted (default DRAFTS.accepted.jsonl),
        ready for raglab cases add.
"""

OWN = ("n", "out", "seed")


def main(argv: list[str]) -> None:
    from raglab.errors import UserError

    if argv[1:2] in (["-h"], ["--help"]):
        print(HELP)
        return
    if argv == ["review"]:
        print(HELP, file=sys.stderr)
        sys.exit(2)
    try:
        if argv[0] == "draft":
            _draft(argv[1:])
        else:
            _review(argv[1:])
    except UserError as e:
        fail(str(e), 2)


def _split(argv: list[str]) -> tuple[dict[str, str], list[str], bool]:
    own: dict[str, str] = {}
    rest: list[str] = []
    dry = False
    args = iter(argv)
    for a in args:
        key = a.split("=", 1)[0]
        if a == "--dry-run":
            dry = True
        elif key == "--follow-ups":
            value = a.split("=", 1)[1] if "=" in a else next(args, None)
            if value is None or value.startswith("-"):
                fail("cases draft: --follow-ups needs a number (--follow-ups 2)", 2)
            own["--follow-ups"] = value
        elif "=" in a and key in OWN:
            own[key] = a.split("=", 1)[1]
        elif key in ("drafter", "+drafter"):
            rest.append("+drafter=" + a.split("=", 1)[1])
        elif a.startswith("-") or "=" not in a:
            fail(f"cases draft: unexpected argument {a!r} (see raglab cases draft --help)", 2)
        else:
            rest.append(a)
    if not any(a.startswith("+drafter=") for a in rest):
        rest.insert(0, "+drafter=claude")
    return own, rest, dry


def _priced(cfg: Any, llm: dict[str, Any]) -> Any:
    """The drafter with its model's prices (its own, else ``llm.prices``, else the shipped
    table; none known: an unknown cost) and ``llm.base_url`` when it sets no server."""
    from raglab.llm.prices import price_of

    update: dict[str, Any] = {"prices": price_of(cfg.model, cfg.prices,
                                                 llm.get("prices")) or {}}
    if llm.get("base_url") and "base_url" in type(cfg).model_fields and cfg.base_url is None:
        update["base_url"] = llm["base_url"]
    return cfg.model_copy(update=update)


def _int(own: dict[str, str], key: str, default: int, low: int) -> int:
    try:
        value = int(own.get(key, default))
    except ValueError:
        fail(f"{key}={own[key]}: not a whole number", 2)
    if value < low:
        fail(f"{key}={value}: must be at least {low}", 2)
    return value


def _draft(argv: list[str]) -> None:
    import asyncio

    from raglab.cases.draft import estimate, existing_share, parse_drafter, plan
    from raglab.cases.draft_follow import MAX_FOLLOW_UPS
    from raglab.commands.compose import compose_config
    from raglab.config import DatasetCfg, parse_section
    from raglab.data.dataset import load_cases, load_corpus, resolve_path
    from raglab.data.io import check_writable_output, refuse_inputs
    from raglab.secrets import override_secrets, register, scrub_output_streams, secret_values

    own, overrides, dry = _split(argv)
    # every line this command prints is scrubbed of the known secrets (the environment's
    # keys, the overrides' and the configuration's), and text is scrubbed before it is cut
    register(override_secrets(overrides))
    scrub_output_streams()
    n, seed = _int(own, "n", 20, 1), _int(own, "seed", 0, 0)
    follow_ups = _int(own, "--follow-ups", 0, 1) if "--follow-ups" in own else 0
    if follow_ups > MAX_FOLLOW_UPS:
        fail(f"--follow-ups {follow_ups}: at most {MAX_FOLLOW_UPS} (a conversation has at "
             "most 20 turns)", 2)
    out = Path(own.get("out") or "drafts.jsonl")
    data = compose_config(overrides)
    register(secret_values(data))
    cfg = _priced(parse_drafter(data.get("drafter")), data.get("llm") or {})
    dcfg = parse_section(DatasetCfg, data.get("dataset"), "dataset")
    corpus_path, cases_path = resolve_path(dcfg.corpus), resolve_path(dcfg.cases)
    refuse_inputs(out, [(corpus_path, "the dataset's corpus"),
                        (cases_path, "the dataset's cases")], f"out={out}",
                  "write the drafts to another file")
    check_writable_output(out)  # refused before any model call, not after
    corpus = load_corpus(corpus_path)
    existing, _ = load_cases(cases_path)
    docs = list(corpus.values())
    the_plan = plan(docs, cfg, n, seed)
    cache = _cache(data)
    est = estimate(the_plan, cfg, cache, follow_ups)
    cost = (f"cost n/a (no price known for {cfg.model}: llm.prices)"
            if est["max_cost_usd"] is None
            else f"at most ${est['max_cost_usd']:.4f}")
    print(f"raglab cases draft: {est['requests']} request(s) to {cfg.model} (drafter "
          f"{cfg.name}), {est['cached']} answered by the cache; about {est['input_tokens']} "
          f"input and at most {est['max_output_tokens']} output tokens: {cost}"
          + (f"; up to {est['paraphrase_at_most']} more to paraphrase (paraphrase_above "
             f"{cfg.paraphrase_above:g})" if est["paraphrase_at_most"] else "")
          + (f"; up to {est['follow_ups_at_most']} more for {follow_ups} follow-up(s) each "
             f"(at most {est['follow_ups_max_output_tokens']} more output tokens)"
             if est["follow_ups_at_most"] else ""))
    for kind, (k, why) in the_plan.missing.items():
        print(f"corpus lacks {kind}: {k} of {the_plan.wanted[kind]} planned not drafted "
              f"({why})")
    if dry:
        print("dry run: nothing sent")
        return
    if not the_plan.planned:
        fail("nothing to draft (see the lines above)", 1)
    _preflight(cfg)
    outcome, summary = asyncio.run(_send(the_plan, cfg, docs, cache, existing,
                                         str(corpus_path), str(cases_path), follow_ups))
    from raglab.data.io import write_jsonl

    write_jsonl(out, outcome.drafts)
    kinds = {k: 0 for k in the_plan.wanted if the_plan.wanted[k]}
    for d in outcome.drafts:
        kinds[d["draft"]["kind"]] = kinds.get(d["draft"]["kind"], 0) + 1
    print(f"{len(outcome.drafts)} draft(s) of {len(the_plan.planned)} requested written to "
          f"{out}, each marked needs_review (raglab cases review {out})")
    print("  by kind (written of planned): " + ", ".join(
        f"{k} {v} of {the_plan.wanted[k]}" for k, v in kinds.items()))
    if follow_ups:
        print(f"  follow-ups: {outcome.conversations} draft(s) written as conversations with "
              f"{outcome.follow_ups} follow-up turn(s) ({follow_ups} asked of each answerable "
              "draft)")
    if outcome.dropped:
        from raglab.text.escape import term

        print(f"dropped {sum(outcome.dropped.values())}: " + "; ".join(
            f"{reason} {k} (first: {term(clip_line(outcome.first_drop[reason], 120))})"
            for reason, k in outcome.dropped.most_common()))
    shares = [d["draft"]["vocabulary_share"] for d in outcome.drafts
              if d["draft"].get("vocabulary_share") is not None]
    mine = f"{sum(shares) / len(shares):.2f}" if shares else "n/a"
    theirs = existing_share(existing, corpus)
    print(f"vocabulary share (question content words found in the evidence document): "
          f"drafts {mine} ({outcome.paraphrased} paraphrased), existing set "
          + (f"{theirs:.2f}" if theirs is not None else "n/a") + f" ({cases_path.name})")
    spent = "unknown" if summary["cost_usd"] is None else f"${summary['cost_usd']:.4f}"
    print(f"model: {summary['requests']} request(s), {summary['cache_hits']} cache hit(s), "
          f"cost {spent}")
    if not outcome.drafts and outcome.dropped.get("model call failed"):
        sys.exit(1)


def _cache(data: dict[str, Any]) -> Any:
    from raglab.cache import StageCache

    return StageCache(str(data.get("cache_dir") or ".raglab-cache"))


def _preflight(cfg: Any) -> None:
    from raglab.errors import ConfigError
    from raglab.llm.backends.openai import check_usable
    from raglab.llm.client import require_api_key

    try:
        if cfg.name == "openai":
            check_usable("drafter=openai", cfg)
        else:
            require_api_key("drafter=claude")
    except ConfigError as e:
        fail(str(e), 2)


async def _send(the_plan: Any, cfg: Any, docs: list, cache: Any, existing: list,
                corpus_path: str, cases_path: str,
                follow_ups: int = 0) -> tuple[Any, dict[str, Any]]:
    from raglab.cases.draft import run_plan
    from raglab.llm.client import LLMClient

    prices = {cfg.model: dict(cfg.prices)} if cfg.prices else {}
    llm = LLMClient(timeout_s=cfg.timeout_s, max_retries=cfg.max_retries,
                    concurrency=cfg.concurrency, prices=prices, cache=cache)
    try:
        outcome = await run_plan(the_plan, cfg, docs, llm, existing, corpus_path, cases_path,
                                 follow_ups)
    finally:
        await llm.aclose()
    return outcome, llm.summary()


def _review(argv: list[str]) -> None:
    from raglab.cases.review import review

    ap = argparse.ArgumentParser(prog="raglab cases review")
    ap.add_argument("drafts", type=Path)
    ap.add_argument("--accepted", type=Path, default=None)
    ap.add_argument("--corpus", type=Path, default=None,
                    help="the corpus (default: the one each draft names)")
    args = ap.parse_args(argv)
    accepted = args.accepted or args.drafts.with_name(args.drafts.stem + ".accepted.jsonl")
    sys.exit(review(args.drafts, accepted, args.corpus))
