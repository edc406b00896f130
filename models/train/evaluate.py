#!/usr/bin/env python3
"""Measures 1bit-tiny through the engine on the CPU machine (standard library only):

  tokenizer   the engine's ids for every held-out document and chat pair vs the training
              tokenizer's ids (reference.json.gz from export.py): identical or not
  logits      the engine's next-token log-probabilities vs PyTorch's on 20 held-out prompts
              (same token ids in, Q8_0 weights on both sides): top-1 identical, max |difference|
  perplexity  llama-perplexity on the held-out documents, target and drafter
  code        greedy answers to 50 held-out docstring prompts: the share that parses as Python
  drafting    the same code prompts through `1bit serve` with and without --draft, one run:
              acceptance (draft_n_accepted / draft_n) and decode speed from the engine's timings

  evaluate.py --reference reference.json.gz [--build build] [--data models/train/data]
              [--out models/train/eval.json]
"""

import argparse
import ast
import gzip
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

from common import format_chat

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
TARGET = os.path.join(ROOT, "models", "1bit-tiny-32m-q8_0.gguf")
DRAFT = os.path.join(ROOT, "models", "1bit-tiny-draft-6m-q8_0.gguf")


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


def perplexity(build, model, docs):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
        f.write("\n\n".join(d["text"] for d in docs.values()))
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


def parses(code):
    try:
        ast.parse(code)
        return True
    except SyntaxError:
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reference", required=True)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--data", default=os.path.join(HERE, "data"))
    ap.add_argument("--out", default=os.path.join(HERE, "eval.json"))
    args = ap.parse_args()
    reference = json.load(gzip.open(args.reference, "rt", encoding="utf-8"))
    docs, chats = load_data(args.data)
    result = {"date": time.strftime("%Y-%m-%d"), "machine": f"{os.cpu_count()} cores"}

    with Serve(args.build, "-m", TARGET, "-np", "1", "-c", "2048") as s:
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

    result["perplexity"] = {"target": perplexity(args.build, TARGET, docs), "draft": perplexity(args.build, DRAFT, docs)}
    print(f"perplexity: {result['perplexity']}", file=sys.stderr)

    # Drafting: the same prompts through a plain and a drafted serve, one after the other.
    prompts = [c["messages"][0]["content"] for c in code_prompts(chats, 20)]
    runs = {}
    for name, extra in (("plain", []), ("draft", ["--draft", DRAFT])):
        with Serve(args.build, "-m", TARGET, "-np", "1", *extra) as s:
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
    result["drafting"] = runs
    print(f"drafting: {runs}", file=sys.stderr)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1, ensure_ascii=False)


if __name__ == "__main__":
    main()
