"""Drive tokensieve's vLLM backend through vLLM's own structured-output code (no GPU, no model).

Run with the Python of an environment where vllm==0.33.0 is installed and tokensieve importable:
    TOKENSIEVE_SHARED=../shared python tests/engines/vllm_check.py
It exits 0 and prints "ok" when every check passes; `tests/test_engines.py` runs it when
`$TOKENSIEVE_VLLM_PYTHON` names such an interpreter. What it checks, through vLLM's classes:
- the plugin makes "tokensieve" a valid `structured_outputs_config.backend`;
- `SamplingParams` validation compiles requests with tokensieve (a bad regex is a
  VLLMValidationError);
- `StructuredOutputManager` builds `TokensieveBackend`, compiles grammars, fills the batch
  bitmask (with speculative draft rows), validates drafts and accepts tokens; every target token
  of a valid instance is allowed in its row and a wrong token is not.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np

import tokensieve.integrations.vllm as backend_module
from vllm.config import StructuredOutputsConfig
from vllm.exceptions import VLLMValidationError
from vllm.sampling_params import SamplingParams, StructuredOutputsParams
from vllm.v1.structured_output import StructuredOutputManager
from vllm.v1.structured_output.request import StructuredOutputRequest


def hf_tokenizer(shared: Path):
    from transformers import PreTrainedTokenizerFast

    folder = Path(tempfile.mkdtemp())
    (folder / "tokenizer.json").write_bytes(gzip.open(shared / "tokenizers" / "llama3" / "tokenizer.json.gz").read())
    return PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"), eos_token="<|end_of_text|>")


def allowed(bitmask_row: np.ndarray, token: int) -> bool:
    return bool((int(bitmask_row[token // 32]) >> (token % 32)) & 1)


def main() -> None:
    shared = Path(os.environ.get("TOKENSIEVE_SHARED", Path(__file__).resolve().parents[3] / "shared"))
    backend_module.register()
    config = StructuredOutputsConfig(backend="tokensieve")
    tokenizer = hf_tokenizer(shared)
    vocab = 128_256 + 256  # a model's logits are wider than its vocabulary

    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name", "age"]}
    params = SamplingParams(structured_outputs=StructuredOutputsParams(json=schema), max_tokens=64)
    params._validate_structured_outputs(config, tokenizer)
    assert params.structured_outputs._backend == "tokensieve", params.structured_outputs._backend
    bad = SamplingParams(structured_outputs=StructuredOutputsParams(regex="ab(c"))
    try:
        bad._validate_structured_outputs(config, tokenizer)
    except VLLMValidationError as err:
        assert "regex" in str(err) or "position" in str(err), err
    else:
        raise AssertionError("a bad regex passed validation")

    manager = object.__new__(StructuredOutputManager)
    manager.backend = None
    manager.backend_name = None
    manager.reasoner_cls = None
    manager.enable_in_reasoning = False
    manager._use_async_grammar_compilation = False
    manager._grammar_bitmask = None
    manager.fill_bitmask_parallel_threshold = 128
    manager.tokenizer = tokenizer
    import torch

    manager._full_mask = torch.tensor(-1, dtype=torch.int32)
    manager.vllm_config = SimpleNamespace(
        structured_outputs_config=config,
        num_speculative_tokens=3,
        model_config=SimpleNamespace(is_diffusion=False, get_vocab_size=lambda: vocab),
        scheduler_config=SimpleNamespace(max_num_seqs=4),
        speculative_config=None,
    )
    request = SimpleNamespace(
        request_id="r1",
        sampling_params=params,
        structured_output_request=StructuredOutputRequest.from_sampling_params(params),
        use_structured_output=True,
        all_token_ids=[],
        prompt_token_ids=[1, 2, 3],
    )
    manager.grammar_init(request)
    assert isinstance(manager.backend, backend_module.TokensieveBackend), manager.backend
    grammar = request.structured_output_request.grammar
    assert isinstance(grammar, backend_module.TokensieveGrammar), grammar

    text = json.dumps({"name": "Ada", "age": 36}, separators=(",", ":"))
    target = tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id]
    wrong = tokenizer.encode("]", add_special_tokens=False)[0]
    position = 0
    while position < len(target):
        drafts = target[position : position + 3]  # the next tokens, as a drafter would propose
        checked = manager.validate_tokens(request, drafts + ([] if position else [wrong]))
        assert checked[: len(drafts)] == drafts, (checked, drafts)
        bitmask = manager.grammar_bitmask({"r1": request}, ["r1"], {"r1": drafts})
        rows = bitmask.reshape(-1, bitmask.shape[-1])
        for offset, token in enumerate(target[position : position + len(drafts) + 1]):
            assert allowed(rows[offset], token), (position, offset, token)
        if position == 0:
            assert not allowed(rows[0], wrong)
        assert manager.accept_tokens(request, [target[position]])
        request.all_token_ids.append(target[position])
        position += 1
    assert grammar.is_terminated()
    assert backend_module.TokensieveBackend.allocate_token_bitmask(manager.backend, 2).shape == (2, (vocab + 31) // 32)
    print("ok")


if __name__ == "__main__":
    sys.exit(main())
