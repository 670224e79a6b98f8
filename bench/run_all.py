"""Run every benchmark (each in its own process) and write BENCHMARKS.md from their JSON results.

.venv/bin/python -m bench.run_all                 # full runs, then BENCHMARKS.md
.venv/bin/python -m bench.run_all --quick         # smoke runs (written to bench/results/BENCHMARKS_quick.md)
.venv/bin/python -m bench.run_all --only search   # one benchmark, then BENCHMARKS.md from all results on disk
.venv/bin/python -m bench.run_all --render        # no runs: BENCHMARKS.md from the results on disk
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

from bench import common

BENCHMARKS = ["embedding", "fast_cpu", "sae_training", "families", "search", "end_to_end"]
NOTES = """## Notes: conditions, gaps and what would close them

**Conditions.** These full runs shared the 2 cores with other engineers' test suites (load average 5 to 12, see each
section). torch's two OpenMP threads then wait on each other at every operation, which slows small operations (SAE
steps, short batches) far more than big ones: absolute seconds here are 2x to 10x what an idle machine gives, and
the absolute targets (families < 10 s, end to end < 90 s / 20 s) are judged under that load. Ratios come from
interleaved runs and hold better. Re-run `.venv/bin/python -m bench.run_all` on an idle machine for the absolute
targets.

**Embedding (1).** Met: chunk-and-average runs at the speed of plain `encode` on the same windows, and a warm
re-run is hundreds of times faster than the cold one. The cold/warm comparison used the first 600 articles and the
throughput comparison the first 300 (all of BBC for the truncation statistics), to fit the run into the time the
loaded machine allowed.

**Fast CPU path (2).** Under the load of the full run (about 10) bf16 measured only 1.2x fp32 and OpenVINO 1.0x;
every path waited on the CPU more than it computed. Earlier the same day, at load 5 to 7, the same 300 articles at
batch 64 in two interleaved rounds gave: torch fp32 1,823 and 1,264 tokens/s, torch bf16 weights 3,525 and 2,560
(1.9x to 2.0x), OpenVINO bf16 5,610 and 5,381 (3.1x to 4.3x fp32, 1.6x to 2.1x torch bf16), minimum cosine to fp32
0.99994 (torch bf16) and 0.99998 (OpenVINO). The issue's idle-machine measurement is 3,960 vs 11,153 tokens/s
(2.8x). The cosine target holds everywhere and the SAE trained on bf16 vectors is as good (held-out FVU within
0.002). Proposal: an OpenVINO backend for CPUs with native bf16 (`openvino` 2026.4.1 from PyPI installs cleanly
beside torch 2.13 and transformers 5, about 200 MB; `openvino.convert_model` on the sentence-transformers module
with dynamic batch and length, compiled with `INFERENCE_PRECISION_HINT=bf16`; conversion took 29 s under load, so
cache the converted model on disk once per model). Confirm it on an idle machine before adopting it: it is the
path most likely to bring the cold end-to-end run under 90 s.

**SAE training (3).** Only the first interleaved pair of the BBC comparison finished (the run was stopped for time;
scaling with n and with documents was not measured in the full run, only in `--quick`). Both trainers ran at about
1 s per step under load, where every torch operation pays for thread contention, so the ratio (1.09x) mostly counts
operations per step; the quick run (less loaded, n = 768) gave 1.42x. At equal settings Prisma's held-out FVU is
within 0.6% of latentsae's (0.3616 vs 0.3595) with 0.3% dead latents against latentsae's 18%. What would close the
gap: fewer operations per step (the training forward builds the dense `latents` [batch, n] code, which the loss
does not use; the AuxK top-k runs over all latents when few are dead), bf16 autocast for the encoder product on
AMX CPUs, and re-measuring on an idle machine.

**Families (4).** Prisma's peak memory is a third to a half of the scipy AᵀA baseline's at n = 12,288 and far below
2 GB; time is the gap. Profiled on the synthetic 12,288 x 200,000 codes under the same load: co-occurrence 11.2 s,
one networkx maximum spanning forest over the 440,670 edges 12.9 s (three rounds are built).
`scipy.sparse.csgraph.minimum_spanning_tree` on the negated weights of the same edges takes 0.47 s and returns a
forest of the same total weight (11,324.42, 12,287 edges): replacing `nx.maximum_spanning_tree` in
`families._oriented_forest` removes most of the time (mind zero weights, which csgraph treats as absent edges, and
tie-breaking, which may pick different equal-weight edges). The co-occurrence count itself is slower than scipy's
AᵀA (which needs up to 2.4x the memory); computing each feature block as a scipy product
`A[:, block].T @ A` would keep the blocked memory bound at compiled speed.

**Search (5).** At LanceDB's defaults the IVF-PQ index finds about a quarter of the true top 10 and took minutes to
build inside `save_vectors`; flat (exact) search through the store was about 1 s per query under load and exact
numpy search over the same vectors 16x faster than that. So `INDEX_MIN_ROWS` was raised from 100,000 to 1,000,000
(prisma_core/store.py) after this run. Where an index is used, `search_documents` should set `refine_factor(10)` and
`nprobes(50)` (recall 0.82 at similar latency); an IVF-HNSW-SQ index, or exact numpy search over the dataset's
vectors the explore pages already hold, would do better still.

**End to end (6).** Missed, under load about 7: the cold run spent 651 s embedding 1.08 million tokens (about
1,700 tokens/s, where an idle machine gives about 11,000 at bf16) and the warm run 103 s training the SAE (600 steps
at n = 3,072) plus about 40 s of process start, model load, ingest and storage. On an idle machine the estimate is
about 100 s of embedding plus training and start-up, so the cold target still needs a faster embedding path (the
OpenVINO proposal above, measured at 1.6x to 2.1x torch bf16) and the warm target a cheaper SAE step and start-up."""


def module(name: str) -> ModuleType:
    return importlib.import_module(f"bench.{name}")


def run_benchmark(name: str, quick: bool, out_dir: Path) -> None:
    command = [sys.executable, "-m", f"bench.{name}", "--out", str(out_dir)] + (["--quick"] if quick else [])
    env = os.environ | {"PYTHONPATH": str(common.REPO), "HF_HUB_OFFLINE": "1"}
    subprocess.run(command, check=True, cwd=common.REPO, env=env)


def render(quick: bool, out_dir: Path) -> str:
    suffix = "_quick" if quick else ""
    sections, devices = [], []
    for name in BENCHMARKS:
        bench = module(name)
        path = out_dir / f"{name}{suffix}.json"
        if not path.is_file():
            sections.append(f"## {bench.TITLE}\n\nNot run yet: `{bench.COMMAND}`.")
            continue
        result = common.read_result(name + suffix, out_dir)
        devices.append(result["device"])
        measured = datetime.fromtimestamp(path.stat().st_mtime, UTC).strftime("%Y-%m-%d %H:%M UTC")
        command = bench.COMMAND + (" --quick" if quick else "")
        sections.append(
            f"## {bench.TITLE}\n\nCommand: `{command}` (measured {measured}, 1-minute load average "
            f"{result['device']['load_average_1m']:.1f} when the result was recorded).\n\n{bench.markdown(result)}"
        )
    return "\n\n".join([_header(devices, quick), *sections, "" if quick else NOTES]).strip() + "\n"


def _header(devices: list[dict], quick: bool) -> str:
    device = devices[0] if devices else common.device_report()
    kind = "quick smoke runs (small data: the numbers are not the benchmark)" if quick else "full runs"
    return f"""# Prisma benchmarks

Written by `.venv/bin/python -m bench.run_all{" --quick" if quick else ""}` ({kind}); each section names the command
that produced it. Every comparison runs Prisma and its baseline interleaved in the same run on the same data and
reports the ratio: the machine is shared, so absolute times drift with its load while side-by-side ratios hold.

Device: {device["cpu"]}, {device["cores"]} cores, torch {device["torch"]} with {device["torch_threads"]} threads,
compute device **{device["device"]}**, native bf16 (AMX / AVX-512 BF16): **{device["native_bf16"]}**, so the
default embedding settings use the vector space **{device["embedding_space_auto"]}**."""


def main() -> None:
    arguments = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arguments.add_argument("--quick", action="store_true")
    arguments.add_argument("--only", choices=BENCHMARKS, action="append")
    arguments.add_argument("--render", action="store_true", help="only render the results already on disk")
    arguments.add_argument("--out", type=Path, default=common.RESULTS_DIR)
    args = arguments.parse_args()
    if not args.render:
        for name in args.only or BENCHMARKS:
            run_benchmark(name, args.quick, args.out)
    target = args.out / "BENCHMARKS_quick.md" if args.quick else common.REPO / "BENCHMARKS.md"
    target.write_text(render(args.quick, args.out))
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
