from hypothesis import given, settings
from hypothesis import strategies as st

from raglab.systems.chunkers import (
    FixedChunkerCfg,
    RecursiveChunkerCfg,
    SentenceChunkerCfg,
    chunk_document,
)
from raglab.text.normalize import count_tokens

TEXTS = st.lists(st.sampled_from(["alpha", "beta.", "Gamma!", "\n\n", "## Head\n\n", "delta?",
                                  "x" * 12, "\n"]), max_size=120).map(" ".join)
CFGS = [FixedChunkerCfg(name="fixed", size=7, overlap=2),
        SentenceChunkerCfg(name="sentence", size=2, overlap=1),
        RecursiveChunkerCfg(name="recursive", size=9, overlap=0),
        RecursiveChunkerCfg(name="recursive", size=9, overlap=2)]


@settings(max_examples=150, deadline=None)
@given(TEXTS)
def test_chunks_keep_offsets_and_cover_every_token(text):
    for cfg in CFGS:
        chunks = chunk_document("d", text, cfg)
        covered = set()
        for c in chunks:
            assert c.doc_id == "d" and text[c.start:c.end] == c.text and c.text.strip()
            covered.update(range(c.start, c.end))
        for i, ch in enumerate(text):
            if not ch.isspace():
                assert i in covered, (cfg.name, i)
        if cfg.name == "fixed":
            assert all(count_tokens(c.text) <= cfg.size for c in chunks)


def test_recursive_keeps_headings_with_their_section():
    text = "# Title\n\nPara one is here. It has two sentences.\n\n## Sub\n\nAnother para."
    chunks = chunk_document("d", text, RecursiveChunkerCfg(name="recursive", size=8))
    assert [c.text for c in chunks] == ["# Title\n\nPara one is here. It has two sentences.",
                                        "## Sub\n\nAnother para."]
