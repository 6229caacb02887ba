"""Text helpers shared by every layer: normalisation, quote location, sentences, terms."""
