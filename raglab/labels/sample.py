"""Drawing the random sample of cases people label (``raglab label RUN --n N``).

Every case gets a pseudo-random key, the sha256 of the seed and its case id; a stratum's
sample is its ``n_h`` cases with the smallest keys. So the same seed draws the same cases
from the same case set on any machine and in any order of the records (runs labelled one
at a time pair up), a larger ``--n`` with the same seed keeps the cases drawn before, and
each case of a stratum is equally likely to be drawn: the inclusion probability of a case
of stratum ``h`` is ``n_h / N_h``, recorded in ``sample.json``.

A stratified sample (``--by KEY``, the value of the case's tag ``KEY``) allocates ``n`` over
the strata in proportion to their size (largest remainders), with at least ten cases in
each stratum that has ten (the fewest labels a stratum's estimate rests on).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from raglab.errors import UserError
from raglab.labels.store import SampleDesign, case_set_sha256, stratum

#: the fewest cases drawn from a stratum that has that many (the fewest labels a stratum's
#: prediction-powered estimate rests on: raglab.stats.ppi.MIN_LABELS)
MIN_PER_STRATUM = 10


def case_key(seed: int, case_id: str) -> str:
    return hashlib.sha256(f"{seed}\n{case_id}".encode()).hexdigest()


def allocate(population: Mapping[str, int], n: int) -> dict[str, int]:
    """Cases to draw from each stratum: proportional to its size, at least
    ``min(MIN_PER_STRATUM, N_h)``, never more than ``N_h``; the sizes sum to ``n`` (or to
    every case, when ``n`` is larger)."""
    total = sum(population.values())
    if n >= total:
        return dict(population)
    if len(population) == 1:  # not stratified
        return {h: n for h in population}
    floor = {h: min(MIN_PER_STRATUM, size) for h, size in population.items()}
    if n < sum(floor.values()):
        raise UserError(f"--n {n} is too small for {len(population)} strata: a stratified "
                        f"sample needs at least {sum(floor.values())} ({MIN_PER_STRATUM} per "
                        "stratum)")
    shares = {h: n * size / total for h, size in population.items()}
    alloc = {h: max(floor[h], int(shares[h])) for h in population}
    # largest remainders first; then take back from the strata furthest above their share
    order = sorted(population, key=lambda h: (-(shares[h] - int(shares[h])), h))
    i = 0
    while sum(alloc.values()) < n:
        h = order[i % len(order)]
        if alloc[h] < population[h]:
            alloc[h] += 1
        i += 1
    while sum(alloc.values()) > n:
        h = max((h for h in population if alloc[h] > floor[h]),
                key=lambda h: (alloc[h] - shares[h], h))
        alloc[h] -= 1
    return alloc


def draw(tags: Mapping[str, Mapping[str, Any]], n: int, seed: int,
         by: str | None) -> SampleDesign:
    """The sample of ``n`` of the cases ``tags`` (case id -> tags)."""
    if n < 1:
        raise UserError(f"--n {n}: draw at least one case")
    members: dict[str, list[str]] = {}
    for cid, case_tags in tags.items():
        members.setdefault(stratum(dict(case_tags), by), []).append(cid)
    if by is not None and set(members) == {stratum({}, by)}:
        raise UserError(f"--by {by}: no case has the tag {by!r}")
    population = {h: len(ids) for h, ids in sorted(members.items())}
    alloc = allocate(population, n)
    sampled = {h: sorted(members[h], key=lambda c: case_key(seed, c))[:alloc[h]]
               for h in population}
    return SampleDesign(seed=seed, by=by, population=population, sampled=sampled,
                        case_set_sha256=case_set_sha256(list(tags)))


def inclusion_probabilities(design: SampleDesign) -> dict[str, float]:
    return {h: len(design.sampled.get(h, [])) / size if size else 0.0
            for h, size in design.population.items()}
