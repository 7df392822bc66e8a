"""Start-up benchmark. Run: python bench/startup.py [--quick] [--runs N] [--negotiate [N]]

Times `psychoalign --help` and `psychoalign --version` as whole processes (interpreter start,
imports, the command, exit), several runs each, and prints min / median / max wall time against
the target of 0.3 s (the median), and the median CPU time (user + system). The command is
`python -m psychoalign` with the interpreter running this script, so it measures the source tree
on PYTHONPATH (or the installed package).

``--negotiate [N]`` (default 12 questions) measures what the embedded default's negotiation adds
to a process, in its own section of docs/performance.md:

* the MiniLM encoder on torch (sentence-transformers) and on ONNX Runtime, each in a fresh
  process: import, load, and one short embedding (the ONNX model exported beforehand, untimed),
  and the largest difference between their embeddings and the classifier's three head scores on
  the held-out requests (identical means within 1e-5);
* one `psychoalign negotiate "Q"` process against one `psychoalign chat "Q"` process on the same
  benign question, for the first N benign questions of bench/data/heldout_requests.yaml, run in
  alternating order; the median of the per-question wall-time ratios against the target of 1.5x;
* where that time goes: one more chat and negotiate process on each of the first 3 questions,
  run with timestamps around the phases (imports, the classifier's and the model's loads, the
  trace store, generation, the EVALUATOR's calls; :data:`PHASE_PROBE`), as medians in seconds
  since the process was spawned. (Separate runs, so the timed processes above run unmodified.)
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


#: Runs `psychoalign ARGS` in this process with timestamps around its phases: wraps the functions
#: below as their modules are imported, and writes the marks as JSON to argv[1] at exit.
#: argv[2] is the time.time() at which the parent spawned the process.
PHASE_PROBE = """
import atexit, functools, importlib.abc, importlib.util, inspect, json, sys, threading, time
out, spawned = sys.argv[1], float(sys.argv[2])
marks = []
WRAP = {
    "psychoalign.cli.chat": [("chat", "command")],
    "psychoalign.cli.negotiate": [("negotiate", "command")],
    "psychoalign.models.minilm": [("load_encoder", "classifier load")],
    "psychoalign.models.classifier": [("SafetyClassifier.evaluate", "EVALUATOR call")],
    "psychoalign.models.local": [("_LoadedModel.__init__", "model load")],
    "psychoalign.traces.store": [("SQLTraceStore.start", "trace store: schema and first write")],
    "llama_cpp.llama": [("Llama.create_completion", "generation")],
}
def note(label, t, extra=0):
    marks.append([label, t - spawned, time.time() - spawned, extra, threading.current_thread().name])
def wrap(fn, label):
    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def awrapped(*a, **k):
            t = time.time()
            try:
                return await fn(*a, **k)
            finally:
                note(label, t)
        return awrapped
    @functools.wraps(fn)
    def wrapped(*a, **k):
        t, result = time.time(), None
        try:
            result = fn(*a, **k)
            return result
        finally:
            usage = result.get("usage", {}) if isinstance(result, dict) else {}
            note(label, t, usage.get("completion_tokens", 0))
    return wrapped
class Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in WRAP:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module
        def exec_module(module):
            run(module)
            for attr, label in WRAP[name]:
                owner, _, method = attr.rpartition(".")
                holder = getattr(module, owner) if owner else module
                setattr(holder, method, wrap(getattr(holder, method), label))
        spec.loader.exec_module = exec_module
        return spec
sys.meta_path.insert(0, Hook())
atexit.register(lambda: (note("exit", time.time()), open(out, "w").write(json.dumps(marks))))
sys.argv = ["psychoalign", *sys.argv[3:]]
from psychoalign.cli.main import run
run()
"""
PHASES = (
    "command",
    "classifier load",
    "model load",
    "trace store: schema and first write",
    "EVALUATOR call",
    "generation",
    "exit",
)


def time_command(args: list[str], runs: int) -> tuple[list[float], list[float], int]:
    """Wall time and CPU time (user + system) of each run; the exit code of the last one."""
    import resource

    cmd = [sys.executable, "-m", "psychoalign", *args]
    subprocess.run(cmd, capture_output=True, check=False)  # untimed: fills the OS file cache
    times, cpus, code = [], [], 0
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, check=False)
        times.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        code = done.returncode
    return times, cpus, code


def _run(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, subprocess.CompletedProcess[str]]:
    t = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    return time.perf_counter() - t, done


def phases(command: str, question: str, env: dict[str, str]) -> dict[str, tuple[float, float, float]]:
    """One `psychoalign COMMAND QUESTION` process under :data:`PHASE_PROBE`: phase -> (first
    start, last end, summed duration), in seconds since the spawn; generation also its tokens."""
    import json
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".json") as marks_file:
        spawned = time.time()
        done = subprocess.run(
            [sys.executable, "-c", PHASE_PROBE, marks_file.name, repr(spawned), command, question],
            capture_output=True,
            text=True,
            check=False,
            env=env,
        )
        if done.returncode:
            raise SystemExit(f"error: psychoalign {command} failed: {done.stderr.strip()[-300:]}")
        marks = json.loads(Path(marks_file.name).read_text(encoding="utf-8"))
    out: dict[str, tuple[float, float, float]] = {}
    for label, start, end, _tokens, _thread in marks:
        if label in out:
            first, _, total = out[label]
            out[label] = (first, end, total + end - start)
        else:
            out[label] = (start, end, end - start)
    out["tokens"] = (0.0, 0.0, float(sum(m[3] for m in marks if m[0] == "generation")))
    return out


def print_phases(questions: list[str], env: dict[str, str]) -> None:
    """Medians over ``questions`` of when each phase starts and ends in a chat and a negotiate process."""
    runs: dict[str, list[dict[str, tuple[float, float, float]]]] = {"chat": [], "negotiate": []}
    for i, q in enumerate(questions):
        for command in ("chat", "negotiate") if i % 2 == 0 else ("negotiate", "chat"):
            runs[command].append(phases(command, q, env))
    print(
        f"  where the time goes (median of {len(questions)} questions, one more process each; "
        "seconds since the process was spawned, start -> end):"
    )
    for label in PHASES:
        cells = []
        for command in ("chat", "negotiate"):
            seen = [r[label] for r in runs[command] if label in r]
            if not seen:
                cells.append("-")
                continue
            start = statistics.median(s for s, _, _ in seen)
            end = statistics.median(e for _, e, _ in seen)
            if label == "exit":
                cells.append(f"{end:.1f}")
            elif label in ("EVALUATOR call", "generation"):
                total = statistics.median(t for _, _, t in seen)
                cells.append(f"{start:.1f} -> {end:.1f} ({total:.1f} s in calls)")
            else:
                cells.append(f"{start:.1f} -> {end:.1f}")
        name = {"command": "the command (imports before it)", "exit": "process exits"}.get(label, label)
        print(f"    {name:<38} chat {cells[0]:<28} negotiate {cells[1]}")
    tokens = {c: statistics.median(r["tokens"][2] for r in runs[c]) for c in runs}
    print(f"    {'tokens generated':<38} chat {tokens['chat']:<28.0f} negotiate {tokens['negotiate']:.0f}")


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
        print_phases(questions[:3], env)
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
            times, cpus, code = time_command([flag], runs)
            med = statistics.median(times)
            status = "" if code == 0 else f"   (exit code {code}: the command failed)"
            print(
                f"  psychoalign {flag:<10} min {min(times):.3f} s   median {med:.3f} s   max {max(times):.3f} s"
                f"   (target median <= {TARGET_S} s){status}"
            )
            print(f"  {'':<22} CPU time (user + system) median {statistics.median(cpus):.3f} s")
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
            "A command that fails (exit code other than 0) counts as missed. The target is on wall time; "
            "the CPU time beside it moves less with other processes' load.",
        )


if __name__ == "__main__":
    main()
