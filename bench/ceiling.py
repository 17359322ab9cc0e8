"""`tokensieve bench batch --ceiling`: what this machine's CPUs give a batch, measured with the
batch's own work in separate processes, so no Python lock or thread hand-over is involved.

Two workers (processes, one core instance each) build the requests of `bench batch` and warm
them. Then, per step, every active worker waits at a barrier, fills its masks in a serial loop
and records when it started and ended:

- **alone**: one worker fills the whole batch, the other idles: the serial time of a step;
- **both**: each worker fills the whole batch at once: the machine's throughput for two
  independent copies of the work (2 × alone / both is the most any two-thread fill could
  gain here, whatever its design: 2.0 on two free cores);
- **split**: each worker fills every other request, as two core instances hold a batch: the
  step ends when the busier one ends (alone / split bounds what a batch split over two
  instances gains with no serial part at all).

The phases take turns for several rounds (the machine's load shifts); figures are medians
over the steps.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time
from typing import Any

PHASES = ("alone", "both", "split")


def _worker(index: int, size: int, steps: int, vs_llguidance: bool, commands: Any, results: Any, barrier: Any) -> None:
    import gzip

    import numpy as np

    from tokensieve import Matcher, Tokenizer, configure

    from .basic import find_shared
    from .maskbench import find_maskbench_dir
    from .serving import BATCH_SIZES, _requests, _warm

    configure(instances=1)
    tokenizer_path = find_shared() / "tokenizers" / "llama3" / "tokenizer.json.gz"
    tokenizer = Tokenizer.from_file(tokenizer_path)
    llg_tokenizer = None
    if vs_llguidance:  # the same requests as `bench batch --vs llguidance` picks
        import llguidance

        llg_tokenizer = llguidance.LLTokenizer(gzip.open(tokenizer_path).read().decode())
    requests = _requests(tokenizer, find_maskbench_dir(), max(BATCH_SIZES), llg_tokenizer)
    batch = [requests[i % len(requests)] for i in range(size)]
    warm = [Matcher(tokenizer, r["grammar"]) for r in batch for _ in range(2)]
    _warm([r for r in batch for _ in range(2)], warm, lambda m, t: (m.compute_bitmask(), m.consume_token(t)), steps)
    bitmask = np.zeros((size, warm[0].mask_words), dtype=np.int32)
    results.put(("ready", index))
    while True:
        phase = commands.get()
        if phase is None:
            return
        mine = batch if phase in ("alone", "both") else batch[index::2]
        active = phase != "alone" or index == 0
        matchers = [Matcher(tokenizer, r["grammar"]) for r in mine] if active else []
        spans = []
        for step in range(steps):
            for request, matcher in zip(mine, matchers):
                if step < len(request["tokens"]) - 1:
                    matcher.consume_token(request["tokens"][step])
            barrier.wait()
            started = time.perf_counter()
            for row, matcher in enumerate(matchers):
                matcher.fill_bitmask(bitmask, row)
            spans.append((started, time.perf_counter()))
        results.put((phase, index, spans))


def run_ceiling(args: argparse.Namespace) -> dict[str, Any]:
    """Per batch size: the median µs per step of each phase, and the two ceilings."""
    context = multiprocessing.get_context("spawn")  # a core instance is not fork-safe
    rows = []
    for size in args.sizes:
        commands = [context.SimpleQueue() for _ in range(2)]
        results = context.SimpleQueue()
        barrier = context.Barrier(2)
        workers = [
            context.Process(target=_worker, args=(i, size, args.steps, args.vs == "llguidance", commands[i], results, barrier))
            for i in range(2)
        ]
        for worker in workers:
            worker.start()
        try:
            for _ in workers:
                if results.get()[0] != "ready":
                    raise SystemExit("a ceiling worker failed to start")
            times: dict[str, list[float]] = {phase: [] for phase in PHASES}
            for _ in range(args.rounds):
                for phase in PHASES:
                    for queue in commands:
                        queue.put(phase)
                    spans = dict(results.get()[1:] for _ in workers)
                    active = [spans[0]] if phase == "alone" else [spans[0], spans[1]]
                    for step_spans in zip(*active):
                        times[phase].append((max(end for _, end in step_spans) - min(start for start, _ in step_spans)) * 1e6)
        finally:
            for queue in commands:
                queue.put(None)
            for worker in workers:
                worker.join(timeout=10)
        alone, both, split = (statistics.median(times[p]) for p in PHASES)
        rows.append({
            "requests": size, "alone_us": alone, "both_us": both, "split_us": split,
            "throughput_ceiling": 2 * alone / both, "split_ceiling": alone / split,
        })
    return {"rows": rows}


def format_ceiling(report: dict[str, Any]) -> str:
    lines = [
        "The machine's ceiling for a batch (separate processes, one core instance each, serial loops; median µs per step)",
        "",
        "| requests | one process, whole batch | two processes, whole batch each | two processes, half each "
        "| 2 x alone / both | alone / split |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for row in report["rows"]:
        lines.append(
            f"| {row['requests']} | {row['alone_us']:.0f} | {row['both_us']:.0f} | {row['split_us']:.0f} "
            f"| {row['throughput_ceiling']:.2f}x | {row['split_ceiling']:.2f}x |"
        )
    return "\n".join(lines)
