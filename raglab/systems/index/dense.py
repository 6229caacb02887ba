"""``embedder=dense``: cosine similarity of all-MiniLM-L6-v2 embeddings (the optional
extra ``dense``). Every allowed chunk is ranked."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from raglab.components import Embedder, Ranker
from raglab.data.schema import Strict
from raglab.registry import register

if TYPE_CHECKING:
    import numpy as np  # lazy: discovering the built-in components imports this module


class DenseCfg(Strict):
    name: Literal["dense"]
    model: str = "all-MiniLM-L6-v2"
    batch_size: int = Field(64, gt=0)


@register("embedder", "dense", config=DenseCfg)
class DenseEmbedder(Embedder):
    """Builds and loads :class:`DenseIndex`."""

    @classmethod
    def preflight(cls, run_cfg) -> None:
        from raglab.systems.embeddings import check_available

        check_available()

    def build(self, path: Path, texts: list[str]) -> None:
        DenseIndex.build(self.cfg, path, texts)

    def load(self, path: Path) -> Ranker:
        return DenseIndex.load(self.cfg, path)


class DenseIndex:
    ARTIFACT = "vectors.npy"

    def __init__(self, cfg, vectors: np.ndarray):
        self.cfg = cfg
        self.vectors = vectors

    @classmethod
    def build(cls, cfg, path: Path, texts: list[str]) -> None:
        import numpy as np

        from raglab.systems.embeddings import embed

        np.save(path / cls.ARTIFACT, embed(texts, cfg.model, cfg.batch_size))

    @classmethod
    def load(cls, cfg, path: Path) -> DenseIndex:
        import numpy as np

        return cls(cfg, np.load(path / cls.ARTIFACT))

    def scores(self, query: str) -> np.ndarray:
        from raglab.systems.embeddings import embed

        q = embed([query], self.cfg.model, self.cfg.batch_size)[0]
        return self.vectors @ q

    def rank(self, query: str, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.scores(query), mask
