"""Start-up benchmark. Run: python bench/startup.py [--quick] [--runs N] [--negotiate [N]]

Times `psychoalign --help` and `psychoalign --version` as whole processes (interpreter start,
imports, the command, exit), several runs each, and prints min / median / max wall time against
the target of 0.3 s (the median). The command is `python -m psychoalign` with the interpreter
running this script, so it measures the source tree on PYTHONPATH (or the installed package).

``--negotiate [N]`` (default 12 questions) measures what the embedded default's negotiation adds
to a process, in its own section of docs/performance.md:

* the MiniLM encoder on torch (sentence-transformers) and on ONNX Runtime, each in a fresh
  process: import, load, and one short embedding (the ONNX model exported beforehand, untimed),
  and the largest difference between their embeddings and the classifier's three head scores on
  the held-out requests (identical means within 1e-5);
* one `psychoalign negotiate "Q"` process against one `psychoalign chat "Q"` process on the same
  benign question, for the first N benign questions of bench/data/heldout_requests.yaml, run in
  alternating order; the median of the per-question wall-time ratios against the target of 1.5x.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import Target, add_doc_flag, captured, publish

TARGET_S = 0.3
TARGET_RATIO = 1.5
ROOT = Path(__file__).resolve().parents[1]
HELDOUT = ROOT / "bench" / "data" / "heldout_requests.yaml"
#: Run in a fresh process: import the runtime, load MiniLM, embed one text; print the seconds.
ENCODER_PROBE = """
import sys, time
t0 = time.perf_counter()
from psychoalign.models.minilm import load_encoder
enc = load_encoder(runtime=sys.argv[1])
t1 = time.perf_counter()
enc(["How do I boil an egg?"])
t2 = time.perf_counter()
print(f"{t1 - t0:.3f} {t2 - t1:.3f}")
"""
#: Embeddings and head scores of both runtimes on the same texts: the largest differences.
ENCODER_COMPARE = """
import sys, yaml, numpy as np
from psychoalign.models.classifier import SafetyClassifier, load_weights
from psychoalign.models.minilm import load_encoder
texts = [t for v in yaml.safe_load(open(sys.argv[1], encoding="utf-8")).values() for t in v]
texts.append(" ".join(["long"] * 400))
a, b = load_encoder(runtime="torch"), load_encoder(runtime="onnx")
out = [float(np.abs(a(texts) - b(texts)).max())]
w = load_weights()
ca, cb = SafetyClassifier(w, a), SafetyClassifier(w, b)
for head in ("request", "response", "adversarial"):
    out.append(float(np.abs(ca.scores(texts, head) - cb.scores(texts, head)).max()))
print(len(texts), *out)
"""


def time_command(args: list[str], runs: int) -> tuple[list[float], int]:
    """Wall time of each run; the exit code of the last one."""
    cmd = [sys.executable, "-m", "psychoalign", *args]
    subprocess.run(cmd, capture_output=True, check=False)  # untimed: fills the OS file cache
    times, code = [], 0
    for _ in range(runs):
        t = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, check=False)
        times.append(time.perf_counter() - t)
        code = done.returncode
    return times, code


def _run(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, subprocess.CompletedProcess[str]]:
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    return time.perf_counter() - t, done


def negotiate_vs_chat(n: int) -> list[Target]:
    """The encoder runtimes, then negotiate vs chat as whole processes (module doc)."""
    import os
    import tempfile

    import yaml

    targets: list[Target] = []
    runtimes = {}
    for runtime in ("torch", "onnx"):
        _run([sys.executable, "-c", ENCODER_PROBE, runtime])  # untimed: exports on first use, fills the file cache
        rows = []
        for _ in range(3):
            _, done = _run([sys.executable, "-c", ENCODER_PROBE, runtime])
            if done.returncode:
                rows = []
                print(f"  MiniLM on {runtime}: unavailable ({done.stderr.strip().splitlines()[-1:]})")
                break
            rows.append([float(x) for x in done.stdout.split()])
        if rows:
            load = statistics.median(r[0] for r in rows)
            runtimes[runtime] = load
            print(
                f"  MiniLM on {runtime:<5}: import + load {load:.2f} s, first embedding "
                f"{statistics.median(r[1] for r in rows) * 1000:.0f} ms (median of 3 fresh processes)"
            )
    if len(runtimes) == 2:
        _, done = _run([sys.executable, "-c", ENCODER_COMPARE, str(HELDOUT)])
        n_texts, emb, *heads = done.stdout.split()
        worst = max(float(emb), *(float(h) for h in heads))
        print(
            f"  torch vs ONNX Runtime on {n_texts} texts: largest difference embedding {float(emb):.1e}, "
            f"scores (request, response, adversarial) {', '.join(f'{float(h):.1e}' for h in heads)}"
        )
        targets.append(Target("MiniLM scores, torch vs ONNX Runtime", f"{worst:.1e}", "<= 1e-5", worst <= 1e-5))
    questions = yaml.safe_load(HELDOUT.read_text(encoding="utf-8"))["benign"][:n]
    ratios, chats, negs = [], [], []
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "XDG_DATA_HOME": home}
        base = [sys.executable, "-m", "psychoalign"]
        _run([*base, "negotiate", questions[0]], env)  # untimed: fills the OS file cache
        for i, q in enumerate(questions):
            order = ("chat", "negotiate") if i % 2 == 0 else ("negotiate", "chat")
            wall = {}
            for command in order:
                wall[command], done = _run([*base, command, q], env)
                if done.returncode:
                    raise SystemExit(f"error: psychoalign {command} failed: {done.stderr.strip()[-300:]}")
            chats.append(wall["chat"])
            negs.append(wall["negotiate"])
            ratios.append(wall["negotiate"] / wall["chat"])
    med = statistics.median(ratios)
    print(
        f"  {len(questions)} benign questions, one process each: chat median {statistics.median(chats):.1f} s, "
        f"negotiate median {statistics.median(negs):.1f} s; negotiate / chat per question: median {med:.2f}x "
        f"(min {min(ratios):.2f}x, max {max(ratios):.2f}x; target <= {TARGET_RATIO}x)"
    )
    targets.append(
        Target(
            "one negotiate process / one chat process, median",
            f"{med:.2f}x",
            f"<= {TARGET_RATIO}x",
            med <= TARGET_RATIO,
        )
    )
    return targets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="5 runs per command instead of 20")
    parser.add_argument("--runs", type=int, default=None, help="runs per command")
    parser.add_argument(
        "--negotiate",
        type=int,
        nargs="?",
        const=12,
        default=None,
        metavar="N",
        help="negotiate vs chat on N benign questions (default 12) and the MiniLM runtimes; its own section",
    )
    add_doc_flag(parser)
    args = parser.parse_args()
    runs = args.runs or (5 if args.quick else 20)
    if args.negotiate is not None:
        with captured() as out:
            print("embedded default: what negotiating adds to a process")
            targets = negotiate_vs_chat(args.negotiate)
        if not args.no_doc:
            publish(
                "startup-negotiate",
                "Start-up of a negotiation, embedded default — `bench/startup.py --negotiate`",
                out.getvalue(),
                targets,
                quick=False,
                note="Whole processes on the embedded default (SmolLM2 DRIVE, MiniLM classifier EVALUATOR): "
                "the encoder's import and load on each runtime, and one `psychoalign negotiate` process against "
                "one `psychoalign chat` process on the same benign question (default flags).",
            )
        return
    targets = []
    with captured() as out:
        print(f"whole-process wall time, {runs} runs each (python -m psychoalign …)")
        for flag in ("--help", "--version"):
            times, code = time_command([flag], runs)
            med = statistics.median(times)
            status = "" if code == 0 else f"   (exit code {code}: the command failed)"
            print(
                f"  psychoalign {flag:<10} min {min(times):.3f} s   median {med:.3f} s   max {max(times):.3f} s"
                f"   (target median <= {TARGET_S} s){status}"
            )
            targets.append(
                Target(
                    f"`psychoalign {flag}`, median", f"{med:.3f} s", f"<= {TARGET_S} s", code == 0 and med <= TARGET_S
                )
            )
    if not args.no_doc:
        publish(
            "startup",
            "Start-up — `bench/startup.py`",
            out.getvalue(),
            targets,
            quick=args.quick,
            note="Each run is a new process: interpreter start, imports, the command, exit. "
            "A command that fails (exit code other than 0) counts as missed.",
        )


if __name__ == "__main__":
    main()
