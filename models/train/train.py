#!/usr/bin/env python3
"""Trains a model of a 1bit family (1bit-tiny, 1bit-small: its target or its drafter) on the GPU
machine, in resumable chunks: the checkpoint records the training time spent, and a run continues
it until --budget minutes are spent in all, stopping after --chunk minutes of this call so that
each call fits the machine's time limit.

  train.py [--family tiny|small] --config target|draft --data DATA_DIR --tokenizer tokenizer.json
           --ckpt CKPT.pt --budget MIN [--chunk MIN] [--seed N]

Prints the training loss as it goes; every 45 s the loss on a validation slice of the training
split (1% of its documents, never trained on) picks the checkpoint to keep; the held-out test
loss is printed once, at the end of each call. The token ids of a data directory are kept beside
it (tokens-<tokenizer hash>-<split>.npz), so later calls and the drafter do not tokenize again.
"""

import argparse
import hashlib
import json
import math
import os
import random
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from tokenizers import Tokenizer

from common import EOT, FAMILIES, format_chat
from model import TinyQwen3

WARMUP_S = 20.0     # seconds of linear warm-up
MIN_LR_FRACTION = 0.1


def learning_rate(base_lr, spent, budget_s):
    """Linear warm-up over WARMUP_S, then cosine decay to MIN_LR_FRACTION at the budget's end."""
    return base_lr * (min(1.0, spent / WARMUP_S) *
                      (MIN_LR_FRACTION + (1 - MIN_LR_FRACTION) * 0.5 * (1 + math.cos(math.pi * (spent / budget_s)))))


def load_documents(data_dir, split):
    """(kind, text) for every document and chat pair of a split."""
    docs = []
    with open(f"{data_dir}/pretrain_{split}.jsonl", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            docs.append(("pretrain:" + r["source"], r["text"]))
    with open(f"{data_dir}/chat_{split}.jsonl", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            docs.append(("chat:" + r["kind"], format_chat(r["messages"])))
    return docs


def tokenize(tok, docs):
    eot = tok.token_to_id(EOT)
    encoded = tok.encode_batch([text for _, text in docs])
    return [(kind, np.array(e.ids + [eot], dtype=np.int32)) for (kind, _), e in zip(docs, encoded)]


def tokenized_split(tok_path, data_dir, split):
    """tokenize(load_documents(...)), from the cache beside the data when it is there."""
    with open(tok_path, "rb") as f:
        key = hashlib.sha256(f.read()).hexdigest()[:12]
    cache = f"{data_dir}/tokens-{key}-{split}.npz"
    if os.path.exists(cache):
        z = np.load(cache)  # each z[...] reads from the archive again: once each
        kinds, ids = [str(k) for k in z["kinds"]], z["ids"]
        bounds = np.concatenate([[0], np.cumsum(z["lengths"])])
        return [(kinds[k], ids[bounds[i]:bounds[i + 1]]) for i, k in enumerate(z["kind_of"])]
    docs = tokenize(Tokenizer.from_file(tok_path), load_documents(data_dir, split))
    kinds = sorted({k for k, _ in docs})
    np.savez(cache + ".part.npz", kinds=np.array(kinds), kind_of=np.array([kinds.index(k) for k, _ in docs]),
             lengths=np.array([len(x) for _, x in docs]), ids=np.concatenate([x for _, x in docs]))
    os.replace(cache + ".part.npz", cache)
    return docs


def stream(tokenized, rng, mix):
    """One pass of the mixture: each document mix[kind] times on average, shuffled."""
    picked = []
    for kind, ids in tokenized:
        w = mix[kind]
        picked += [ids] * (int(w) + (rng.random() < w - int(w)))
    rng.shuffle(picked)
    return np.concatenate(picked)


def batches(tokenized, seed, mix, batch, context):
    rng = random.Random(seed)
    while True:
        s = stream(tokenized, rng, mix)
        n = (len(s) - 1) // context
        order = list(range(n))
        rng.shuffle(order)
        for i in range(0, n - batch + 1, batch):
            idx = np.array(order[i:i + batch])[:, None] * context + np.arange(context + 1)[None, :]
            yield torch.from_numpy(s[idx].astype(np.int64))


@torch.no_grad()
def heldout_loss(model, tokenized, device, batch, context):
    s = np.concatenate([ids for _, ids in tokenized])
    n = (len(s) - 1) // context
    total, count = 0.0, 0
    for i in range(0, n, batch):
        idx = np.arange(i, min(n, i + batch))[:, None] * context + np.arange(context + 1)[None, :]
        x = torch.from_numpy(s[idx].astype(np.int64)).to(device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(x[:, :-1])
        total += F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1), reduction="sum").item()
        count += x[:, 1:].numel()
    return total / count


UNFINISHED = 75  # exit status of a call that stopped at --chunk with budget left


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", choices=sorted(FAMILIES), default="tiny")
    ap.add_argument("--config", choices=("target", "draft"), required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--budget", type=float, required=True, help="minutes of training in all")
    ap.add_argument("--chunk", type=float, default=1e9, help="minutes of training in this call")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    device = "cuda"
    family = FAMILIES[args.family]
    mix, batch, context = family["mix"], family["batch"], family["context"]
    tok = Tokenizer.from_file(args.tokenizer)
    t0 = time.time()
    train = tokenized_split(args.tokenizer, args.data, "train")
    test = tokenized_split(args.tokenizer, args.data, "test")
    # Every 100th training document is set aside for choosing the checkpoint, so the held-out
    # test split stays unseen by every decision.
    val, train = train[::100], [d for i, d in enumerate(train) if i % 100]
    print(f"train: tokenized {sum(len(x) for _, x in train)} train and {sum(len(x) for _, x in test)} held-out "
          f"tokens in {time.time() - t0:.0f} s", file=sys.stderr)

    cfg = family["models"][args.config]
    base_lr = cfg["lr"]
    model = TinyQwen3(cfg, tok.get_vocab_size()).to(device)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=base_lr, betas=(0.9, 0.95), fused=True)
    # A checkpoint holds the weights to go on from ("latest", with the optimizer's state) and the
    # best by validation loss so far over every call ("model", what export.py reads).
    spent, step, tokens, best = 0.0, 0, 0, (float("inf"), None)
    if os.path.exists(args.ckpt):
        state = torch.load(args.ckpt, map_location=device)
        model.load_state_dict(state.get("latest", state["model"]))
        opt.load_state_dict(state["opt"])
        spent, step, tokens = state["spent"], state["step"], state.get("tokens", 0)
        best = (state["val_loss"], state["model"])
        print(f"train: resumed at step {step}, {spent / 60:.1f} of {args.budget} min spent", file=sys.stderr)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"train: {args.family} {args.config}: {n_params / 1e6:.2f}M parameters, {cfg}", file=sys.stderr)

    step_fn = torch.compile(model)
    # --chunk bounds this call's training time, compilation not included, like --budget.
    budget_s, chunk_s = args.budget * 60, args.chunk * 60
    spent0, step0 = spent, step
    loader = batches(train, args.seed * 1000 + step, mix, batch, context)
    tokens_seen, last_print, last_val = 0, time.time(), time.time()
    while spent < budget_s and spent - spent0 < chunk_s:
        lr = learning_rate(base_lr, spent, budget_s)
        for g in opt.param_groups:
            g["lr"] = lr
        t = time.time()
        x = next(loader).to(device, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            try:
                logits = step_fn(x[:, :-1])
            except Exception as e:  # a compiler problem must not cost the run: go on uncompiled
                if step_fn is model:
                    raise
                print(f"train: torch.compile failed ({type(e).__name__}: {e}); running eagerly", file=sys.stderr)
                step_fn = model
                logits = step_fn(x[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tokens_seen += x[:, 1:].numel()
        tokens += x[:, 1:].numel()
        if step - step0 > 3:  # a call's first steps include compilation: not training time
            spent += time.time() - t
        if time.time() - last_val > 45:
            model.eval()
            v = heldout_loss(model, val, device, batch, context)
            model.train()
            if v < best[0]:
                best = (v, {k: t.detach().clone() for k, t in model.state_dict().items()})
            print(f"train: step {step} validation loss {v:.4f} (best {best[0]:.4f})", file=sys.stderr)
            last_val = time.time()
        if time.time() - last_print > 30:
            rate = tokens_seen / (time.time() - last_print)
            print(f"train: step {step} loss {loss.item():.3f} lr {lr:.2e} {rate / 1e3:.0f}k tok/s "
                  f"{spent / 60:.1f}/{args.budget} min, {tokens / 1e6:.0f}M tokens", file=sys.stderr)
            tokens_seen, last_print = 0, time.time()
    model.eval()
    latest = {k: t.detach().clone() for k, t in model.state_dict().items()}
    v = heldout_loss(model, val, device, batch, context)
    if v < best[0] or best[1] is None:
        best = (v, latest)
    model.load_state_dict(best[1])
    loss = heldout_loss(model, test, device, batch, context)
    print(f"train: step {step}: held-out loss {loss:.4f} (perplexity {math.exp(loss):.2f}), "
          f"{spent / 60:.1f} of {args.budget} min spent, {tokens / 1e6:.0f}M tokens seen", file=sys.stderr)
    print(f"train: kept the checkpoint with validation loss {best[0]:.4f}", file=sys.stderr)
    # Written aside and renamed: a call killed while saving keeps the previous checkpoint.
    torch.save({"model": best[1], "latest": latest, "opt": opt.state_dict(), "spent": spent, "step": step,
                "tokens": tokens, "family": args.family, "config": args.config, "heldout_loss": loss, "val_loss": best[0]}, args.ckpt + ".part")
    os.replace(args.ckpt + ".part", args.ckpt)
    if spent < budget_s:
        print("train: budget not spent yet: the same command continues from the checkpoint", file=sys.stderr)
        sys.exit(UNFINISHED)


if __name__ == "__main__":
    main()
