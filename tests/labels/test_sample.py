"""The sample people label: reproducible by seed whatever the order of the cases, nested as
it grows, stratified in proportion with known inclusion probabilities."""

from __future__ import annotations

import pytest

from raglab.errors import UserError
from raglab.labels.sample import allocate, draw, inclusion_probabilities

TAGS = {f"c{i:03d}": {"intent": ["billing", "exports", "support"][i % 3] if i < 150 else
                      "billing"} for i in range(200)}


def test_the_same_seed_draws_the_same_cases_in_any_order():
    a = draw(TAGS, 30, seed=4, by=None)
    b = draw(dict(reversed(list(TAGS.items()))), 30, seed=4, by=None)
    assert a == b and len(a.sampled["all"]) == 30
    assert draw(TAGS, 30, seed=5, by=None).sampled != a.sampled
    bigger = draw(TAGS, 50, seed=4, by=None)  # a larger sample keeps the cases drawn before
    assert set(a.sampled["all"]) <= set(bigger.sampled["all"])
    assert a.population == {"all": 200}


def test_each_case_is_equally_likely_to_be_drawn():
    counts = dict.fromkeys(TAGS, 0)
    for seed in range(400):
        for cid in draw(TAGS, 20, seed=seed, by=None).sampled["all"]:
            counts[cid] += 1
    # expected 40 draws each (400 * 20 / 200); binomial sd ~6
    assert 20 < min(counts.values()) and max(counts.values()) < 62


def test_a_stratified_sample_is_proportional_with_a_floor():
    d = draw(TAGS, 60, seed=1, by="intent")
    assert d.population == {"billing": 100, "exports": 50, "support": 50}
    sizes = {h: len(ids) for h, ids in d.sampled.items()}
    assert sizes == {"billing": 30, "exports": 15, "support": 15}
    assert all(TAGS[c]["intent"] == h for h, ids in d.sampled.items() for c in ids)
    assert inclusion_probabilities(d) == {"billing": 0.3, "exports": 0.3, "support": 0.3}
    assert allocate({"a": 190, "b": 10}, 40) == {"a": 30, "b": 10}  # the floor of 10
    assert allocate({"a": 3, "b": 5}, 100) == {"a": 3, "b": 5}  # every case
    with pytest.raises(UserError, match="too small for 3 strata"):
        draw(TAGS, 20, seed=1, by="intent")
    with pytest.raises(UserError, match="no case has the tag"):
        draw(TAGS, 20, seed=1, by="nope")


def test_the_floor_is_the_fewest_labels_an_estimate_rests_on():
    from raglab.labels.estimate import MIN_SLICE_LABELS
    from raglab.labels.sample import MIN_PER_STRATUM
    from raglab.stats.ppi import MIN_LABELS

    assert MIN_PER_STRATUM == MIN_SLICE_LABELS == MIN_LABELS
