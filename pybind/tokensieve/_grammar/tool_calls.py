"""Tool calls in a model family's own output format, from the OpenAI request shape.

`tool_call_structural_tag(model=…, tools=…, tool_choice=…, parallel_tool_calls=…,
reasoning=…)` returns the structural tag (a plain dict, inspectable and serialisable) that
`Grammar.structural_tag` compiles; `Grammar.tool_calls` does both. For the families XGrammar
0.2.8 also builds (`xgrammar.get_model_structural_tag`) the tag accepts the same strings, so a
server can switch engines without changing what a model may write.

Every family has the same skeleton, assembled by `_assemble`:

    [reasoning prefix]  then  one of
      text only               tool_choice "none", or no tools
      free text ∪ calls       "auto": text, where a trigger opens a call
      calls only              "required": at least one call
      one named call          a named tool_choice

`parallel_tool_calls=False` allows one call: nothing after it. The reasoning prefix is free
text up to the family's end-of-thinking marker: "enabled" continues a `<think>` the chat
template already opened, "auto" makes a whole `<think>…</think>` block optional, "disabled"
has none. Free text never contains the thinking markers (`excludes`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .._errors import GrammarError

_THINK = ("<think>", "</think>")


@dataclass(frozen=True)
class Tool:
    """One tool as the model names it, with the JSON Schema of its arguments (`True`: any
    JSON value, as for a tool without `parameters` or with `strict: false`)."""

    name: str
    parameters: dict[str, Any] | bool
    builtin: bool = False


@dataclass(frozen=True)
class _Request:
    tools: tuple[Tool, ...]
    choice: str  # "auto", "required" or "forced"
    reasoning: str  # "enabled", "disabled" or "auto"
    parallel: bool


def tool_call_structural_tag(
    *,
    model: str,
    tools: Sequence[Any] = (),
    tool_choice: Any = "auto",
    parallel_tool_calls: bool = True,
    reasoning: bool | str = "enabled",
) -> dict[str, Any]:
    """The structural tag for a model family's tool calls.

    Args:
        model: the output format: one of `MODEL_FAMILIES` (`"llama"`, `"qwen_3"`,
            `"qwen_3_coder"`, `"deepseek_v3_1"`, `"harmony"`, `"kimi"`, `"mistral"`, …).
        tools: OpenAI tools: `{"type": "function", "function": {"name", "parameters",
            "strict"}}`; for Harmony also built-in tools `{"type", "name", "parameters"}`.
        tool_choice: `"auto"` (or None), `"required"`, `"none"`, a named function
            `{"type": "function", "function": {"name": …}}`, a built-in tool's `{"type": …}`,
            or `{"type": "allowed_tools", "allowed_tools": {"mode", "tools"}}`.
        parallel_tool_calls: False allows at most one call (exactly one when required).
        reasoning: `"enabled"` (True), `"disabled"` (False) or `"auto"`; families without a
            reasoning block ignore it.

    Raises:
        GrammarError: an unknown family, a malformed tool or tool choice, a named tool that
            is not in `tools`, or "required" with no tools.
    """
    build = MODEL_FAMILIES.get(model)
    if build is None:
        raise GrammarError(f"unknown tool-call format {model!r}; known: {', '.join(sorted(MODEL_FAMILIES))}")
    if isinstance(reasoning, bool):
        reasoning = "enabled" if reasoning else "disabled"
    if reasoning not in ("enabled", "disabled", "auto"):
        raise GrammarError(f"reasoning must be a bool or one of 'enabled', 'disabled', 'auto', not {reasoning!r}")
    if not isinstance(parallel_tool_calls, bool):
        raise GrammarError("parallel_tool_calls must be a bool")
    request = _request(tools, tool_choice, reasoning, parallel_tool_calls)
    return {"type": "structural_tag", "format": build(request)}


# -- the request --------------------------------------------------------------------------------


def _request(tools: Sequence[Any], tool_choice: Any, reasoning: str, parallel: bool) -> _Request:
    if tools is None:
        tools = ()
    if not isinstance(tools, (list, tuple)):
        raise GrammarError("tools must be a list")
    parsed = tuple(_tool(t, f"tools[{i}]") for i, t in enumerate(tools))
    names = [t.name for t in parsed if not t.builtin]
    if len(set(names)) != len(names):
        raise GrammarError("tools: two function tools have the same name")
    choice = "auto" if tool_choice is None else tool_choice
    if choice == "none":
        return _Request((), "auto", reasoning, parallel)
    if choice in ("auto", "required"):
        if choice == "required" and not parsed:
            raise GrammarError("tool_choice 'required' needs at least one tool")
        return _Request(parsed, choice, reasoning, parallel)
    if not isinstance(choice, dict) or not isinstance(choice.get("type"), str):
        raise GrammarError(f"tool_choice must be 'auto', 'required', 'none' or an object, not {choice!r}")
    kind = choice["type"]
    if kind == "function":
        name = (choice.get("function") or {}).get("name")
        chosen = tuple(t for t in parsed if not t.builtin and t.name == name)
        if not chosen:
            raise GrammarError(f"tool_choice names the function {name!r}, which is not in tools")
        return _Request(chosen, "forced", reasoning, parallel)
    if kind == "allowed_tools":
        allowed = choice.get("allowed_tools")
        if not isinstance(allowed, dict) or allowed.get("mode") not in ("auto", "required"):
            raise GrammarError("tool_choice.allowed_tools needs mode 'auto' or 'required' and a tools list")
        functions, builtins = set(), set()
        for ref in allowed.get("tools") or []:
            if not isinstance(ref, dict) or not isinstance(ref.get("type"), str):
                raise GrammarError(f"tool_choice.allowed_tools.tools: bad reference {ref!r}")
            if ref["type"] == "function":
                functions.add((ref.get("function") or {}).get("name"))
            else:
                builtins.add(ref["type"])
        missing = functions - {t.name for t in parsed if not t.builtin}
        if missing:
            raise GrammarError(f"tool_choice.allowed_tools names functions not in tools: {sorted(map(str, missing))}")
        kept = tuple(t for t in parsed if (t.name in functions if not t.builtin else _builtin_type(tools, t) in builtins))
        if allowed["mode"] == "required" and not kept:
            raise GrammarError("tool_choice 'required' needs at least one tool")
        return _Request(kept, allowed["mode"], reasoning, parallel)
    chosen = tuple(t for t in parsed if t.builtin and _builtin_type(tools, t) == kind)
    if len(chosen) != 1:
        raise GrammarError(f"tool_choice {{'type': {kind!r}}} must match exactly one built-in tool, matched {len(chosen)}")
    return _Request(chosen, "forced", reasoning, parallel)


def _tool(item: Any, where: str) -> Tool:
    if not isinstance(item, dict) or not isinstance(item.get("type"), str):
        raise GrammarError(f"{where}: a tool is an object with a `type`")
    if item["type"] == "function":
        function = item.get("function")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not function["name"]:
            raise GrammarError(f"{where}: a function tool needs `function.name`")
        parameters = function.get("parameters")
        if function.get("strict") is False or parameters is None:
            parameters = True
        if not isinstance(parameters, (dict, bool)):
            raise GrammarError(f"{where}.function.parameters: must be a JSON Schema")
        return Tool(function["name"], parameters)
    name = item.get("name") or item["type"]
    parameters = item.get("parameters")
    if parameters is None:
        parameters = True
    if not isinstance(name, str) or not isinstance(parameters, (dict, bool)):
        raise GrammarError(f"{where}: a built-in tool has a string `name` and a JSON Schema `parameters`")
    return Tool(name, parameters, builtin=True)


def _builtin_type(tools: Sequence[Any], tool: Tool) -> str | None:
    for item in tools:
        if item.get("type") != "function" and (item.get("name") or item["type"]) == tool.name:
            return item["type"]
    return None


# -- formats ------------------------------------------------------------------------------------


def _const(value: str) -> dict[str, Any]:
    return {"type": "const_string", "value": value}


def _seq(*elements: dict[str, Any]) -> dict[str, Any]:
    return {"type": "sequence", "elements": list(elements)}


def _text(excludes: Sequence[str] = ()) -> dict[str, Any]:
    return {"type": "any_text", "excludes": list(excludes)}


def _tag(begin: str, content: dict[str, Any], end: str | list[str]) -> dict[str, Any]:
    return {"type": "tag", "begin": begin, "content": content, "end": end}


def _json(schema: dict[str, Any] | bool, style: str = "json") -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": schema, "style": style}


def _triggered(triggers: list[str], tags: list[dict[str, Any]], request: _Request, excludes: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "triggered_tags", "triggers": triggers, "tags": tags, "excludes": list(excludes),
        "at_least_one": request.choice == "required", "stop_after_first": not request.parallel,
    }


def _separated(tags: list[dict[str, Any]], separator: str, *, at_least_one: bool, stop_after_first: bool) -> dict[str, Any]:
    return {
        "type": "tags_with_separator", "tags": tags, "separator": separator,
        "at_least_one": at_least_one, "stop_after_first": stop_after_first,
    }


def _think(request: _Request, *, then: str = "", enabled_excludes: Sequence[str] = _THINK, begin: str = _THINK[0], end: str = _THINK[1]) -> dict[str, Any] | None:
    """The reasoning block: "enabled" continues the thinking the prompt opened (free text up
    to `end`), "auto" makes a whole block optional, "disabled" has none."""
    if request.reasoning == "disabled":
        return None
    if request.reasoning == "enabled":
        block = _tag("", _text(enabled_excludes), end)
    else:
        block = _tag(begin, _text(_THINK), end)
    if then:
        block = _seq(block, _const(then))
    return {"type": "optional", "content": block} if request.reasoning == "auto" else block


def _assemble(prefix: dict[str, Any] | None, body: dict[str, Any]) -> dict[str, Any]:
    return body if prefix is None else _seq(prefix, body)


def _simple(
    request: _Request,
    *,
    trigger: str,
    call: Callable[[Tool], dict[str, Any]],
    prefix: dict[str, Any] | None,
    excludes: Sequence[str] = _THINK,
) -> dict[str, Any]:
    """Families where each call is one tag opened by a common trigger."""
    if not request.tools:
        return _assemble(prefix, _text(excludes))
    if request.choice == "forced":
        return _assemble(prefix, call(request.tools[0]))
    return _assemble(prefix, _triggered([trigger], [call(t) for t in request.tools], request, excludes))


# -- the families -------------------------------------------------------------------------------


def _llama(request: _Request) -> dict[str, Any]:
    """Llama 3.x JSON tool calls: `{"name": "f", "parameters": {…}}` (no reasoning block)."""
    return _simple(
        request, trigger='{"name": ', prefix=None,
        call=lambda t: _tag(f'{{"name": {json.dumps(t.name)}, "parameters": ', _json(t.parameters), "}"),
    )


def _qwen_3(request: _Request) -> dict[str, Any]:
    """Qwen3, Qwen2.5 and Hermes: `<tool_call>\\n{"name": "f", "arguments": {…}}\\n</tool_call>`."""
    return _simple(
        request, trigger="<tool_call>", prefix=_think(request, then="\n\n"),
        call=lambda t: _tag(f'<tool_call>\n{{"name": {json.dumps(t.name)}, "arguments": ', _json(t.parameters), "}\n</tool_call>"),
    )


def _qwen_3_coder(request: _Request) -> dict[str, Any]:
    """Qwen3-Coder and Qwen3.5 XML: `<tool_call>\\n<function=f>\\n<parameter=p>v</parameter>…`."""
    return _simple(
        request, trigger="<tool_call>\n<function=", prefix=_think(request, then="\n\n"),
        call=lambda t: _tag(f"<tool_call>\n<function={t.name}>\n", _json(t.parameters, "qwen_xml"), "\n</function>\n</tool_call>"),
    )


_DS_CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
_DS_CALLS_END = "<｜tool▁calls▁end｜>"


def _deepseek_v3_1(request: _Request) -> dict[str, Any]:
    """DeepSeek V3.1: a calls section of `<｜tool▁call▁begin｜>f<｜tool▁sep｜>{…}<｜tool▁call▁end｜>`."""
    prefix = _think(request)

    def call(tool: Tool, begin: str = "", end: str = "") -> dict[str, Any]:
        return _tag(f"{begin}<｜tool▁call▁begin｜>{tool.name}<｜tool▁sep｜>", _json(tool.parameters), f"<｜tool▁call▁end｜>{end}")

    if not request.tools:
        return _assemble(prefix, _text(_THINK))
    if request.choice == "forced":
        return _assemble(prefix, call(request.tools[0], _DS_CALLS_BEGIN, _DS_CALLS_END))
    calls = _separated([call(t) for t in request.tools], "", at_least_one=True, stop_after_first=not request.parallel)
    section = _tag(_DS_CALLS_BEGIN, calls, _DS_CALLS_END)
    if request.choice == "required":
        return _assemble(prefix, section)
    return _assemble(prefix, _triggered([_DS_CALLS_BEGIN], [section], request, _THINK))


_KIMI_EXCLUDES = (*_THINK, "<|tool_call_begin|>")


def _kimi(request: _Request) -> dict[str, Any]:
    """Kimi K2: `<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{…}<|tool_call_end|>…`."""
    prefix = _think(request, enabled_excludes=())

    def call(tool: Tool) -> dict[str, Any]:
        arguments = _seq({"type": "regex", "pattern": r"\d+"}, _const("<|tool_call_argument_begin|>"), _json(tool.parameters))
        return _tag(f"<|tool_call_begin|>functions.{tool.name}:", arguments, "<|tool_call_end|>")

    if not request.tools:
        return _assemble(prefix, _text(_THINK))
    if request.choice == "forced":
        return _assemble(prefix, _seq(_const("<|tool_calls_section_begin|>"), call(request.tools[0]), _const("<|tool_calls_section_end|>")))
    calls = _separated([call(t) for t in request.tools], "", at_least_one=True, stop_after_first=not request.parallel)
    if request.choice == "required":
        return _assemble(prefix, _seq(_const("<|tool_calls_section_begin|>"), calls, _const("<|tool_calls_section_end|>")))
    section = _tag("<|tool_calls_section_begin|>", calls, "<|tool_calls_section_end|>")
    return _assemble(prefix, _triggered(["<|tool_calls_section_begin|>"], [section], request, _KIMI_EXCLUDES))


_HARMONY_NEXT = "<|start|>assistant"
_HARMONY_TEXT_END = ["<|end|>", "<|return|>"]


def _harmony(request: _Request) -> dict[str, Any]:
    """GPT-OSS Harmony: messages on channels, separated by `<|start|>assistant`. A call is a
    commentary message to `functions.f` (three header orders the model writes), built-in tools
    keep their own recipient; reasoning is the analysis channel, the answer the final one."""

    def calls(tool: Tool) -> list[dict[str, Any]]:
        to = tool.name if tool.builtin else f"functions.{tool.name}"
        content = _json(tool.parameters)
        return [
            _tag(f"<|channel|>commentary to={to}<|constrain|>json<|message|>", content, "<|call|>"),
            _tag(f" to={to}<|channel|>commentary <|constrain|>json<|message|>", content, "<|call|>"),
            _tag(f" to={to}<|channel|>commentary json<|message|>", content, "<|call|>"),
        ]

    call_tags = [tag for tool in request.tools for tag in calls(tool)]
    text_tags = []
    if request.choice == "auto":
        text_tags.append(_tag("<|channel|>final<|message|>", _text(), list(_HARMONY_TEXT_END)))
    if request.reasoning != "disabled":
        text_tags.append(_tag("<|channel|>analysis<|message|>", _text(), list(_HARMONY_TEXT_END)))
    if request.parallel or not call_tags:
        return _separated(call_tags + text_tags, _HARMONY_NEXT, at_least_one=False, stop_after_first=False)
    one_call = _separated(call_tags, _HARMONY_NEXT, at_least_one=True, stop_after_first=True)
    if not text_tags:
        # XGrammar lets a Harmony response hold no call even when one is required, in the
        # parallel form too (`at_least_one` false above); the same strings, here.
        return {"type": "optional", "content": one_call}
    return {"type": "or", "elements": [
        _separated(text_tags, _HARMONY_NEXT, at_least_one=False, stop_after_first=False),
        one_call,
        _seq(_separated(text_tags, _HARMONY_NEXT, at_least_one=True, stop_after_first=False), _const(_HARMONY_NEXT), one_call),
    ]}


def _mistral(request: _Request) -> dict[str, Any]:
    """Mistral (v3 to v7 tokenizers: Mistral 7B v0.3, NeMo, Small, Large):
    `[TOOL_CALLS][{"name": "f", "arguments": {…}}, …]`; Magistral's `[THINK]…[/THINK]`."""
    prefix = _think(request, begin="[THINK]", end="[/THINK]", enabled_excludes=("[THINK]", "[/THINK]"))
    excludes = ("[THINK]", "[/THINK]")

    def call(tool: Tool) -> dict[str, Any]:
        return _tag(f'{{"name": {json.dumps(tool.name)}, "arguments": ', _json(tool.parameters), "}")

    if not request.tools:
        return _assemble(prefix, _text(excludes))
    if request.choice == "forced":
        return _assemble(prefix, _tag("[TOOL_CALLS][", call(request.tools[0]), "]"))
    calls = _separated([call(t) for t in request.tools], ", ", at_least_one=True, stop_after_first=not request.parallel)
    section = _tag("[TOOL_CALLS][", calls, "]")
    if request.choice == "required":
        return _assemble(prefix, section)
    return _assemble(prefix, _triggered(["[TOOL_CALLS]"], [section], request, excludes))


MODEL_FAMILIES: dict[str, Callable[[_Request], dict[str, Any]]] = {
    "llama": _llama,
    "qwen_3": _qwen_3,
    "hermes": _qwen_3,
    "qwen_3_coder": _qwen_3_coder,
    "qwen_3_5": _qwen_3_coder,
    "deepseek_v3_1": _deepseek_v3_1,
    "kimi": _kimi,
    "harmony": _harmony,
    "mistral": _mistral,
}
