"""The benchmarks: every figure side by side with llguidance (and XGrammar where it applies),
in the same process and run, because these machines are noisy and only ratios carry.

They live in the source checkout, not in the installed package; `tokensieve bench …` runs
them when this folder sits beside `pybind/` (`tokensieve._tools.cli` finds it), and
`python -m bench …` from the checkout's root does the same. Tests never import them: what a
test and a benchmark share (the MaskBench runner, the hostile corpus, the leak check) is a
tool of the package, in `tokensieve._tools`.
"""

from __future__ import annotations

from typing import Any


def add_commands(sub: Any) -> None:
    """Register every `tokensieve bench <name>` subcommand on `sub`."""
    from .alternations import add_alternations_bench
    from .basic import add_cfg_bench, add_regex_bench
    from .ff import add_ff_bench
    from .hostile import add_hostile_bench
    from .leak import add_leak_bench
    from .maskbench import add_maskbench_bench
    from .pld import add_pld_bench
    from .scaling import add_scaling_bench
    from .serving import add_serving_benches
    from .tools import add_tools_bench
    from .web import add_web_bench

    add_regex_bench(sub)
    add_cfg_bench(sub)
    add_ff_bench(sub)
    add_maskbench_bench(sub)
    add_pld_bench(sub)
    add_hostile_bench(sub)
    add_leak_bench(sub)
    add_serving_benches(sub)
    add_tools_bench(sub)
    add_web_bench(sub)
    add_alternations_bench(sub)
    add_scaling_bench(sub)
