"""SGLang 0.5.23's grammar-backend interface as its source defines it (the names and signatures
of `sglang/srt/constrained/base_grammar_backend.py`, written from a reading of it; no code
copied). The real package is checked by tests/engines/sglang_check.py where it is installed."""

from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

GRAMMAR_BACKEND_REGISTRY: dict = {}


class GrammarRow(NamedTuple):
    row: int
    grammar: "BaseGrammarObject"


class BaseGrammarObject:
    def __init__(self) -> None:
        self._finished = False
        self.grammar_stats = None
        self.current_token = None

    @property
    def finished(self) -> bool:
        return self._finished

    @finished.setter
    def finished(self, finished: bool) -> None:
        self._finished = finished

    def copy(self) -> "BaseGrammarObject":
        return self


class InvalidGrammarObject(BaseGrammarObject):
    def __init__(self, error_message: str = "Unknown grammar error") -> None:
        super().__init__()
        self.error_message = error_message


class BaseGrammarBackend:
    def __init__(self) -> None:
        self.executor = ThreadPoolExecutor()
        self.cache: dict = {}


def register_grammar_backend(name: str, init_func: Any) -> None:
    GRAMMAR_BACKEND_REGISTRY[name] = init_func
