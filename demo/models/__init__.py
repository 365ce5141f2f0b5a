"""The demo's two model families: the project's own decoder and a Hugging Face causal LM."""

from inferensics.demo.models.decoder import DecoderConfig, TinyDecoder, pad_cache

__all__ = ["DecoderConfig", "TinyDecoder", "pad_cache"]
