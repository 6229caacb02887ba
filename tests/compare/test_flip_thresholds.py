"""``compare.flip_thresholds``: the flip metrics and thresholds come from the metric
declarations; the config and ``--set`` override one, add one or drop one (null)."""

from __future__ import annotations

from raglab.commands.compare import settings
from raglab.compare.config import CompareCfg
from raglab.metrics.catalog import FLIP_THRESHOLDS


def test_defaults_are_the_declared_thresholds_in_order():
    assert CompareCfg().flip_thresholds == FLIP_THRESHOLDS
    assert list(settings(None, []).flip_thresholds.items()) == list(FLIP_THRESHOLDS.items())


def test_set_overrides_adds_and_drops_keeping_the_order():
    cfg = settings(None, ["flip_thresholds.faithfulness=0.8", "flip_thresholds.correctness=0.5",
                          "flip_thresholds.false_answer_rate=null"])
    want = {**FLIP_THRESHOLDS, "faithfulness": 0.8, "correctness": 0.5}
    del want["false_answer_rate"]
    assert list(cfg.flip_thresholds.items()) == list(want.items())
    assert CompareCfg(flip_thresholds={"faithfulness": 0.9}).flip_thresholds["faithfulness"] \
        == 0.9
