#!/usr/bin/env python3
"""Measures a 1bit family (1bit-tiny, 1bit-small) through the engine on the CPU machine (standard
library only):

  tokenizer   the engine's ids for every held-out document and chat pair vs the training
              tokenizer's ids (reference.json.gz from export.py): identical or not
  logits      the engine's next-token log-probabilities vs PyTorch's on 20 held-out prompts
              (same token ids in, Q8_0 weights on both sides): top-1 identical, max |difference|
  perplexity  llama-perplexity on the held-out documents (in id order, at most --ppl-chars of
              text), target and drafter
  code        greedy answers to 50 held-out docstring prompts: the share that parses as Python;
              and for every held-out function whose docstring has doctests that its own source
              passes when run alone: the share of answers that pass them
  drafting    the first 20 code prompts through `1bit serve` without a drafter, with --draft and,
              where the family has one, with --dflash drafting whole blocks (--draft-max 15), one
              run: acceptance (draft_n_accepted / draft_n) and decode speed from the engine's
              timings; the dflash acceptance beside the one export_dflash.py simulated in PyTorch
              for the same prompts (dflash-reference.json)

  evaluate.py [--family tiny|small] [--build build] [--data DIR] [--ppl-chars N] [--only drafting]
  (--only drafting measures the drafting again and keeps the rest of eval.json)
  (defaults by family: tiny reads models/train/{reference.json.gz,data/} and writes
  models/train/eval.json; small reads models/train/small/{reference.json.gz,heldout.tar.xz} and
  writes models/train/small/eval.json)
"""

import argparse
import ast
import doctest
import gzip
import json
import math
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request

from common import format_chat

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
FAMILIES = {
    "tiny": dict(target="1bit-tiny-32m-q8_0.gguf", draft="1bit-tiny-draft-6m-q8_0.gguf", dir=HERE, ppl_chars=None),
    "small": dict(target="1bit-small-145m-q4_0.gguf", draft="1bit-small-draft-19m-q8_0.gguf",
                  dflash="1bit-small-dflash-25m-q8_0.gguf", dir=os.path.join(HERE, "small"), ppl_chars=400_000),
}


class Serve:
    """`1bit serve` on a free port for the duration of a with-block."""

    def __init__(self, build, *args):
        self.cmd = [os.path.join(build, "bin", "1bit"), "serve", "--port", "0", *args]

    def __enter__(self):
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(self.cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        for line in self.proc.stderr:
            m = re.search(r"ready on http://127.0.0.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                return self
        raise SystemExit(f"evaluate: serve did not start: {' '.join(self.cmd)}")

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(timeout=30)

    def post(self, path, body):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as r:
            return json.load(r)


def load_data(data):
    docs = {json.loads(l)["id"]: json.loads(l) for l in open(os.path.join(data, "pretrain_test.jsonl"), encoding="utf-8")}
    chats = [json.loads(l) for l in open(os.path.join(data, "chat_test.jsonl"), encoding="utf-8")]
    return docs, chats


def tokenizer_parity(s, reference, docs, chats):
    texts = {k: v["text"] for k, v in docs.items()}
    texts.update({"chat:" + c["id"]: format_chat(c["messages"]) for c in chats})
    same, first_diff, n_tokens = 0, None, 0
    for key, ids in reference["tokens"].items():
        got = s.post("/tokenize", {"content": texts[key]})["tokens"]
        n_tokens += len(ids)
        if got == ids:
            same += 1
        elif first_diff is None:
            at = next((i for i, (a, b) in enumerate(zip(got, ids)) if a != b), min(len(got), len(ids)))
            first_diff = {"text": key, "position": at, "engine": got[at:at + 5], "training": ids[at:at + 5]}
    return {"texts": len(reference["tokens"]), "identical": same, "tokens": n_tokens, "first_difference": first_diff}


def logit_parity(s, reference):
    rows, max_diff, max_top1_diff, top1 = [], 0.0, 0.0, 0
    for p in reference["prompts"]:
        r = s.post("/completion", {"prompt": p["ids"], "n_predict": 1, "n_probs": 20, "temperature": 0,
                                   "cache_prompt": False})
        engine = {t["id"]: t["logprob"] for t in r["completion_probabilities"][0]["top_logprobs"]}
        torch_top = {i: lp for i, lp in p["top"]}
        common = set(engine) & set(torch_top)
        diff = max(abs(engine[i] - torch_top[i]) for i in common)
        same_top1 = max(engine, key=engine.get) == p["top"][0][0]
        top1 += same_top1
        max_diff = max(max_diff, diff)
        first = p["top"][0][0]
        if first in engine:
            max_top1_diff = max(max_top1_diff, abs(engine[first] - p["top"][0][1]))
        rows.append({"id": p["id"], "top1_identical": same_top1, "max_abs_logprob_diff": diff, "compared": len(common)})
    return {"prompts": len(rows), "top1_identical": top1, "max_abs_logprob_diff": max_diff,
            "max_abs_top1_logprob_diff": max_top1_diff, "rows": rows}


def perplexity(build, model, docs, max_chars):
    text = "\n\n".join(docs[k]["text"] for k in sorted(docs))
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
        f.write(text[:max_chars] if max_chars else text)
        path = f.name
    out = subprocess.run([os.path.join(build, "bin", "llama-perplexity"), "-m", model, "-f", path, "-c", "1024",
                          "-b", "1024", "--no-warmup"], capture_output=True, text=True)
    os.unlink(path)
    m = re.search(r"Final estimate: PPL = ([\d.]+) \+/- ([\d.]+)", out.stdout + out.stderr)
    if not m:
        raise SystemExit("evaluate: llama-perplexity printed no estimate:\n" + out.stderr[-2000:])
    chunks = re.search(r"calculating perplexity over (\d+) chunks", out.stderr)
    return {"ppl": float(m.group(1)), "plus_minus": float(m.group(2)), "chunks": int(chunks.group(1)) if chunks else None}


def code_prompts(chats, n=50):
    return sorted((c for c in chats if c["kind"] == "code"), key=lambda c: c["id"])[:n]


def answer(s, prompt, max_tokens=400):
    r = s.post("/v1/chat/completions", {"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
                                        "temperature": 0})
    return r["choices"][0]["message"]["content"], r["timings"]


DOCTEST_RUNNER = """
import doctest, json, sys
code, docstring, name = json.load(sys.stdin)
ns = {"__name__": "__evaluated__"}
exec(compile(code, "<answer>", "exec"), ns)
test = doctest.DocTestParser().get_doctest(docstring, ns, name, "<docstring>", 0)
if not test.examples:
    sys.exit(3)
runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
runner.run(test, out=lambda s: None)
sys.exit(0 if runner.failures == 0 else 1)
"""


def passes_doctests(code, docstring, name):
    """Runs the docstring's examples against `code` in a fresh interpreter (10 s at most) without
    site-packages (-I -S), so that an example cannot import the package's own function instead."""
    try:
        r = subprocess.run([sys.executable, "-I", "-S", "-c", DOCTEST_RUNNER], input=json.dumps([code, docstring, name]),
                           capture_output=True, text=True, timeout=10)
        return r.returncode == 0
    except subprocess.TimeoutExpired:
        return False


def doctest_tasks(chats):
    """Held-out docstring pairs whose docstring has examples, none of them an import, that the
    original function passes on its own."""
    tasks = []
    for c in sorted(chats, key=lambda c: c["id"]):
        doc = c.get("docstring")
        if c["kind"] != "code" or not doc or ">>>" not in doc or re.search(r">>> .*\bimport\b", doc):
            continue
        name = c["id"].rsplit(":", 1)[1]
        if passes_doctests(c["messages"][1]["content"], doc, name):
            tasks.append(c)
    return tasks


def parses(code):
    try:
        ast.parse(code)
        return True
    except SyntaxError:
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--family", choices=sorted(FAMILIES), default="tiny")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--data", help="the held-out split (default: the family's)")
    ap.add_argument("--ppl-chars", type=int, help="perplexity over at most this much held-out text")
    ap.add_argument("--only", choices=("drafting",), help="measure only this and keep the rest of eval.json")
    args = ap.parse_args()
    fam = FAMILIES[args.family]
    target, draft = (os.path.join(ROOT, "models", fam[k]) for k in ("target", "draft"))
    reference = json.load(gzip.open(os.path.join(fam["dir"], "reference.json.gz"), "rt", encoding="utf-8"))
    data = args.data
    if data is None and args.family == "tiny":
        data = os.path.join(HERE, "data")
    elif data is None:
        data = tempfile.mkdtemp(prefix="1bit-heldout-")
        with tarfile.open(os.path.join(fam["dir"], "heldout.tar.xz")) as t:
            t.extractall(data, filter="data")
    docs, chats = load_data(data)
    ppl_chars = args.ppl_chars or fam["ppl_chars"]
    result = {"date": time.strftime("%Y-%m-%d"), "machine": f"{os.cpu_count()} cores"}
    eval_path = os.path.join(fam["dir"], "eval.json")
    if args.only:
        result = json.load(open(eval_path, encoding="utf-8"))
        result["drafting"] = drafting(args.build, fam, target, draft, chats)
        result["drafting_date"] = time.strftime("%Y-%m-%d")
        with open(eval_path, "w") as f:
            json.dump(result, f, indent=1, ensure_ascii=False)
        return

    with Serve(args.build, "-m", target, "-np", "1", "-c", "2048") as s:
        result["tokenizer"] = tokenizer_parity(s, reference, docs, chats)
        print(f"tokenizer: {result['tokenizer']['identical']}/{result['tokenizer']['texts']} held-out texts identical",
              file=sys.stderr)
        result["logits"] = logit_parity(s, reference)
        print(f"logits: top-1 {result['logits']['top1_identical']}/{result['logits']['prompts']}, max |diff| "
              f"{result['logits']['max_abs_logprob_diff']:.4f} (of the top-1 token: "
              f"{result['logits']['max_abs_top1_logprob_diff']:.4f})", file=sys.stderr)
        samples = []
        for c in code_prompts(chats):
            text, _ = answer(s, c["messages"][0]["content"])
            samples.append({"id": c["id"], "prompt": c["messages"][0]["content"], "answer": text, "parses": parses(text)})
        result["code"] = {"prompts": len(samples), "parse": sum(x["parses"] for x in samples), "samples": samples}
        print(f"code: {result['code']['parse']}/{result['code']['prompts']} answers parse as Python", file=sys.stderr)
        tasks = doctest_tasks(chats)
        rows = []
        for c in tasks:
            text, _ = answer(s, c["messages"][0]["content"])
            name = c["id"].rsplit(":", 1)[1]
            ok = parses(text)
            rows.append({"id": c["id"], "parses": ok, "passes": ok and passes_doctests(text, c["docstring"], name),
                         "answer": text})
        result["doctests"] = {"tasks": len(rows), "parse": sum(r["parses"] for r in rows),
                              "pass": sum(r["passes"] for r in rows), "rows": rows}
        print(f"doctests: {result['doctests']['pass']}/{len(rows)} answers pass the held-out function's doctests "
              f"({result['doctests']['parse']} parse)", file=sys.stderr)

    result["perplexity"] = {"text_chars": ppl_chars, "target": perplexity(args.build, target, docs, ppl_chars),
                            "draft": perplexity(args.build, draft, docs, ppl_chars)}
    print(f"perplexity: {result['perplexity']}", file=sys.stderr)

    result["drafting"] = drafting(args.build, fam, target, draft, chats)
    with open(eval_path, "w") as f:
        json.dump(result, f, indent=1, ensure_ascii=False)


def drafting(build, fam, target, draft, chats):
    """The same prompts through a plain and each drafted serve, one after the other."""
    prompts = [c["messages"][0]["content"] for c in code_prompts(chats, 20)]
    configs = [("plain", []), ("draft", ["--draft", draft])]
    if "dflash" in fam:
        configs.append(("dflash", ["--dflash", os.path.join(ROOT, "models", fam["dflash"]), "--draft-max", "15"]))
    runs = {}
    for name, extra in configs:
        with Serve(build, "-m", target, "-np", "1", *extra) as s:
            answer(s, prompts[0], 16)  # warm-up
            speeds, drafted, accepted = [], 0, 0
            for p in prompts:
                _, t = answer(s, p, 256)
                speeds.append(t["predicted_per_second"])
                drafted += t.get("draft_n", 0)
                accepted += t.get("draft_n_accepted", 0)
            speeds.sort()
            runs[name] = {"median_tok_s": speeds[len(speeds) // 2], "mean_tok_s": sum(speeds) / len(speeds),
                          "draft_n": drafted, "draft_n_accepted": accepted,
                          "acceptance": accepted / drafted if drafted else None}
    simulated = os.path.join(fam["dir"], "dflash-reference.json")
    if "dflash" in runs and os.path.exists(simulated):
        runs["dflash"]["simulated_acceptance"] = json.load(open(simulated))["acceptance"]
    print(f"drafting: {runs}", file=sys.stderr)
    return runs


if __name__ == "__main__":
    main()
