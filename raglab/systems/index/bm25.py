"""``embedder=bm25``: a lexical index (bm25s, English stopwords). A chunk sharing no term
with the query scores 0 and is not returned."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from raglab.components import Embedder
from raglab.data.schema import Strict
from raglab.registry import register

if TYPE_CHECKING:
    import numpy as np


class Bm25Cfg(Strict):
    name: Literal["bm25"]
    k1: float = Field(1.5, gt=0)
    b: float = Field(0.75, ge=0, le=1)


def _tokenize(texts: list[str]) -> list[list[str]]:
    import bm25s

    return bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=False)


@register("embedder", "bm25", config=Bm25Cfg)
class Bm25Embedder(Embedder):
    """Builds and loads :class:`Bm25Index`."""

    def build(self, path: Path, texts: list[str]) -> None:
        Bm25Index.build(self.cfg, path, texts)

    def load(self, path: Path) -> Bm25Index:
        return Bm25Index.load(self.cfg, path)


class Bm25Index:
    ARTIFACT = "bm25"

    def __init__(self, model):
        self.model = model

    @classmethod
    def build(cls, cfg, path: Path, texts: list[str]) -> None:
        import bm25s

        bm = bm25s.BM25(k1=cfg.k1, b=cfg.b)
        bm.index(bm25s.tokenize(texts, stopwords="en", show_progress=False),
                 show_progress=False)
        bm.save(str(path / cls.ARTIFACT), show_progress=False)

    @classmethod
    def load(cls, cfg, path: Path) -> Bm25Index:
        import bm25s

        return cls(bm25s.BM25.load(str(path / cls.ARTIFACT), show_progress=False))

    def scores(self, query: str) -> np.ndarray:
        import numpy as np

        toks = [t for t in _tokenize([query])[0] if t in self.model.vocab_dict]
        if not toks:
            return np.zeros(self._n_docs(), dtype=np.float32)
        return np.asarray(self.model.get_scores(toks), dtype=np.float32)

    def _n_docs(self) -> int:
        return int(self.model.scores["num_docs"])  # one bm25s "document" per chunk

    def rank(self, query: str, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        s = self.scores(query)
        return s, mask & (s > 0)
