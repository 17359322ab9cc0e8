"""A stand-in for SGLang's `sglang.srt.constrained` package (see tests/engines/README.md)."""
