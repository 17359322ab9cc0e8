"""vLLM 0.33.0's structured-output backend interface, as its source defines it: the abstract
classes and the request types, with the same names and signatures (written from a reading of
`vllm/v1/structured_output/backend_types.py`; no code copied). The real package is checked by
tests/engines/vllm_check.py where it is installed."""

import enum
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any


class StructuredOutputOptions(enum.Enum):
    JSON = enum.auto()
    JSON_OBJECT = enum.auto()
    REGEX = enum.auto()
    GRAMMAR = enum.auto()
    CHOICE = enum.auto()
    STRUCTURAL_TAG = enum.auto()


class StructuredOutputGrammar(ABC):
    @abstractmethod
    def accept_tokens(self, request_id: str, tokens: list[int]) -> bool: ...

    @abstractmethod
    def validate_tokens(self, tokens: list[int]) -> list[int]: ...

    @abstractmethod
    def rollback(self, num_tokens: int) -> None: ...

    @abstractmethod
    def fill_bitmask(self, bitmask: Any, batch_index: int) -> None: ...

    @abstractmethod
    def is_terminated(self) -> bool: ...

    @abstractmethod
    def reset(self) -> None: ...


@dataclass
class StructuredOutputBackend(ABC):
    vllm_config: Any
    tokenizer: Any
    vocab_size: int

    @abstractmethod
    def compile_grammar(self, request_type: StructuredOutputOptions, grammar_spec: str, stop_token_ids: "set[int] | None" = None) -> StructuredOutputGrammar: ...

    @abstractmethod
    def allocate_token_bitmask(self, max_num_seqs: int) -> Any: ...

    @abstractmethod
    def destroy(self) -> None: ...
