"""A stand-in for vLLM's `vllm.v1.structured_output` package (see tests/engines/README.md)."""
