"""tokensieve: constrained decoding with a grammar matcher core in WebAssembly.

The public API is exactly `__all__`.
"""

from ._core import CoreOptions as CoreOptions
from ._core import CorePool as CorePool
from ._core import configure as configure
from ._decoding.batch import fill_bitmasks as fill_bitmasks
from ._errors import ArgumentError as ArgumentError
from ._errors import CoreTrap as CoreTrap
from ._errors import GrammarError as GrammarError
from ._errors import LimitError as LimitError
from ._errors import TokenizerError as TokenizerError
from ._errors import TokensieveError as TokensieveError
from ._decoding.generate import GenerateResult as GenerateResult
from ._decoding.generate import Sampling as Sampling
from ._decoding.generate import generate as generate
from ._grammar.grammar import Grammar as Grammar
from ._grammar.grammar import Limits as Limits
from ._grammar.grammar import clear_grammar_cache as clear_grammar_cache
from ._decoding.matcher import Matcher as Matcher
from ._decoding.prompt_lookup import PromptLookup as PromptLookup
from ._tokenizer.tokenizer import Tokenizer as Tokenizer
from ._grammar.tool_calls import tool_call_structural_tag as tool_call_structural_tag

__version__ = "0.1.0"

__all__ = [
    "ArgumentError",
    "CoreOptions",
    "CorePool",
    "CoreTrap",
    "GenerateResult",
    "Grammar",
    "GrammarError",
    "LimitError",
    "Limits",
    "Matcher",
    "PromptLookup",
    "Sampling",
    "Tokenizer",
    "TokenizerError",
    "TokensieveError",
    "__version__",
    "configure",
    "fill_bitmasks",
    "generate",
    "tool_call_structural_tag",
    "clear_grammar_cache",
]
