"""``embedder=hybrid``: reciprocal rank fusion of the bm25 and dense rankings,
``score = sum 1 / (rrf_k + rank)`` over the allowed chunks (the optional
extra ``dense``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from raglab.data.schema import Strict
from raglab.registry import register
from raglab.systems.index.bm25 import Bm25Cfg, Bm25Index
from raglab.systems.index.dense import DenseCfg, DenseEmbedder, DenseIndex
from raglab.systems.index.store import ranked

if TYPE_CHECKING:
    import numpy as np  # lazy, as in dense.py


class HybridCfg(Strict):
    name: Literal["hybrid"]
    model: str = "all-MiniLM-L6-v2"
    batch_size: int = Field(64, gt=0)
    k1: float = Field(1.5, gt=0)
    b: float = Field(0.75, ge=0, le=1)
    rrf_k: int = Field(60, gt=0)


def _parts(cfg: HybridCfg) -> tuple[Bm25Cfg, DenseCfg]:
    return (Bm25Cfg(name="bm25", k1=cfg.k1, b=cfg.b),
            DenseCfg(name="dense", model=cfg.model, batch_size=cfg.batch_size))


@register("embedder", "hybrid", config=HybridCfg)
class HybridEmbedder(DenseEmbedder):
    """Builds and loads :class:`HybridIndex` (needs what the dense embedder needs)."""

    def build(self, path: Path, texts: list[str]) -> None:
        HybridIndex.build(self.cfg, path, texts)

    def load(self, path: Path) -> HybridIndex:
        return HybridIndex.load(self.cfg, path)


class HybridIndex:
    def __init__(self, cfg: HybridCfg, bm25: Bm25Index, dense: DenseIndex):
        self.cfg = cfg
        self.bm25 = bm25
        self.dense = dense

    @classmethod
    def build(cls, cfg, path: Path, texts: list[str]) -> None:
        b, d = _parts(cfg)
        Bm25Index.build(b, path, texts)
        DenseIndex.build(d, path, texts)

    @classmethod
    def load(cls, cfg, path: Path) -> HybridIndex:
        b, d = _parts(cfg)
        return cls(cfg, Bm25Index.load(b, path), DenseIndex.load(d, path))

    def rank(self, query: str, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """RRF over each ranking of the allowed chunks (a chunk without a query term still
        gets its dense rank)."""
        import numpy as np

        scores = np.zeros(len(mask), dtype=np.float64)
        for s in (self.bm25.scores(query), self.dense.scores(query)):
            order = ranked(s, mask)
            scores[order] += 1.0 / (self.cfg.rrf_k + np.arange(1, len(order) + 1,
                                                                dtype=np.float64))
        return scores, mask
