"""Tokenizer loading: the byte string of every token id, which ids are special, which end text.

The core never sees a tokenizer. It sees three flat tables (`Tokenizer.core_tables`): the bytes
of every id, where each one starts, and one kind byte per id (text, special, unused). This
module exists to get those bytes exactly right for real tokenizers, and to turn text back into
the ids the real tokenizer would choose (`Tokenizer.encode`, used by fast-forward healing and
prompt lookup).

Sources. A Hugging Face `tokenizer.json` is parsed with the standard `json` module, so loading
works under Pyodide, where `tokenizers`, `numpy` and `transformers` are absent. `from_hf` takes
the same JSON from a live `tokenizers.Tokenizer` (or a `transformers` fast tokenizer's backend),
and `from_token_bytes` takes the byte strings directly.

Token bytes. The flavour is read from the `decoder`, `pre_tokenizer` and `normalizer` sections,
never from file names:

- byte-level BPE (GPT-2, Llama-3, Qwen): each character of a vocab string stands for one byte
  through GPT-2's byte-to-unicode alphabet (`Ġ` is the space). All vocab strings are joined, sent
  through one `str.translate` and encoded as latin-1, then sliced back by length: the Llama-3
  vocabulary (128k tokens) converts in about 30 ms. A string with a character outside the
  alphabet is taken as its UTF-8 bytes, as the `tokenizers` ByteLevel decoder does.
- SentencePiece-style (Mistral, Gemma, Llama-2): `▁` (or the file's Metaspace replacement) is a
  space, and with byte fallback `<0xNN>` is the single raw byte NN. Gemma holds a literal "\\t"
  at id 226, where `<0x09>` would be; the rule gives it b"\\t" with no special case.
- anything else decodes as the UTF-8 of the vocab string; decoders that would change bytes in
  ways not modelled here (WordPiece `##`, BPE `</w>` suffixes, CTC) are rejected.

Added tokens (`added_tokens`) are their `content` as UTF-8.

Kinds. Every id `< vocab_size` is one of: text (0, in the core's token trie, matched by grammar
text), special (1, never matched by grammar text), unused (2: holes in the id space and the
padding ids `n_tokens <= id < vocab_size`; never allowed). Special means: an added token whose
`special` flag is true; an added token with no `special` flag whose content is shaped `<...>`;
any end-of-sequence id. The file's explicit flag wins over the shape, so Qwen's non-special
added tokens (`<tool_call>`, `<|fim_prefix|>`, ...) stay text tokens, matched by grammar text
exactly as the real tokenizer produces them from text.

End-of-sequence ids. Passed explicitly, or else from `tokenizer_config.json` (`eos_token`) and
`generation_config.json` (`eos_token_id`, an int or a list) found beside the file or on the hub,
or else guessed: every added token whose content is one of `_EOS_TOKEN_NAMES`
(`<|end_of_text|>`, `<|endoftext|>`, `</s>`, `<eos>`, `<|eot_id|>`, `<|im_end|>`, `<|end|>`).
Only added tokens count, so a vocab entry `</s>` (Gemma's HTML tag) is never an EOS.

Encoding. `encode` returns ids whose bytes are exactly the input: `decode(encode(x)) == x`,
which fast-forward healing relies on. So it never adds BOS/EOS, and the pipeline steps that
would change the text are turned off: prefix spaces (a `Prepend("▁")` normalizer as in
Mistral/Llama-2, ByteLevel `add_prefix_space`, a Metaspace prepend scheme) and Unicode normal
forms (Qwen's NFC). Text is tokenized as in the middle of a generation. For tokenizers without
such steps (GPT-2, Llama-3, Gemma), and for Qwen on NFC text, the ids equal `tokenizers`'
`encode(text, add_special_tokens=False)`; for Mistral, whose normalizer prepends "▁",
`tokenizers`' encoding of `text` equals `encode(" " + text)` here.

With `tokenizers` importable, `encode` runs a private copy of the real tokenizer with those
steps off and `encode_special_tokens` on, so text that looks like a special token
(`"<|eot_id|>"`) is encoded as plain text, while non-special added tokens are still matched as
the real tokenizer does.
Without it, a pure-Python implementation of the same pipeline runs: added-token split,
normalizers (NFC/NFD/NFKC/NFKD, Lowercase, Prepend, Replace), pre-tokenizers (Split,
ByteLevel, Metaspace) and the BPE model (merge ranks applied lowest rank first, leftmost first,
`ignore_merges`, byte fallback, `unk` fusing), mirroring `tokenizers`. The Split regex uses the
`regex` module when importable (it knows `\\p{L}`); otherwise `\\p{..}` classes are expanded to
explicit code point ranges from `unicodedata` for the `re` module, which differs from
`tokenizers` (Oniguruma) only in rare corners such as which control characters `\\s` matches.
Unigram models are supported for token bytes, and for encoding only through `tokenizers`.

Bytes that are not valid UTF-8. `encode(bytes)` splits the input into maximal valid UTF-8 runs
and invalid bytes. Each run is encoded as text; each invalid byte becomes the token whose bytes
are exactly that one byte (a byte-level alphabet token, or `<0xNN>`), so
`decode(encode(data)) == data` holds. Tokenization at the edges of an invalid byte may differ
from what a byte-level model would produce for the whole input; a tokenizer with no token for
some byte raises `TokenizerError`. Likewise a literal "▁" in the input of a SentencePiece-style
tokenizer, which the tokenizer itself would read as a space, becomes its three byte-fallback
tokens (when the tokenizer has them; otherwise the tokenizer's own lossy reading is kept).
"""

from .tokenizer import Tokenizer as Tokenizer
