#!/usr/bin/env python3
"""Trains a family's DFlash drafter against its shipped target on the GPU machine, in resumable
chunks as train.py does (the same data, mixture, validation slice and checkpoint rules):

  train_dflash.py [--family small] --target TARGET.gguf --data DATA_DIR --tokenizer tokenizer.json
                  --ckpt CKPT.pt --budget MIN [--chunk MIN] [--seed N]

Each step runs the target (frozen, the GGUF's weights) over a batch of training sequences for its
layer inputs, picks `anchors` random block starts per sequence and trains the drafter to predict
the block_size - 1 tokens after each anchor from the context before it: cross-entropy per block
position, weighted exp(-(k-1)/gamma) for position k as DFlash does, since a late position only
counts when every earlier one was right. Validation: the same loss and each position's accuracy on
the validation slice. The mask token is the training split's least used token (ideally unused):
the drafter shares the target's embedding, so the mask must be a row no text needs."""

import argparse
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from tokenizers import Tokenizer

from common import FAMILIES
from dflash import DFlashDrafter, blocks, load_target, target_features
from train import UNFINISHED, batches, learning_rate, tokenized_split


def block_loss(drafter, target, cfg, x, anchors, mask_id, weights):
    """(weighted loss, accuracy per block position (block-1,)) of a batch x (b, t)."""
    with torch.no_grad():
        _, feats = target_features(target, x, cfg["target_layers"])
    btok, bpos, labels, mask = blocks(x, anchors, cfg["block_size"], mask_id)
    ctx_pos = torch.arange(x.shape[1], device=x.device)[None].expand(x.shape[0], -1)
    h = drafter(target.token_embd.weight, feats, ctx_pos, btok, bpos, mask)
    b, a, k = labels.shape
    h = h.view(b, a, k + 1, -1)[:, :, 1:]
    logits = (h @ target.token_embd.weight.t()).float()
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="none").view(b, a, k)
    loss = (ce * weights).sum(-1).mean() / weights.sum()
    acc = (logits.argmax(-1) == labels).float().mean((0, 1))
    return loss, acc


def random_anchors(gen, b, t, n, block, device):
    """n distinct anchors per row in [1, t - block]: each has context and a whole block inside."""
    scores = torch.rand(b, t - block, generator=gen, device=device)
    return scores.topk(n, dim=1).indices + 1


@torch.no_grad()
def validate(drafter, target, cfg, val, mask_id, weights, device, seqs=64):
    s = np.concatenate([ids for _, ids in val])
    t = cfg["context"]
    n = min(seqs, len(s) // t)
    x = torch.from_numpy(s[:n * t].astype(np.int64).reshape(n, t)).to(device)
    gen = torch.Generator(device=device).manual_seed(0)
    losses, accs = [], []
    for i in range(0, n, 16):
        xb = x[i:i + 16]
        anchors = random_anchors(gen, xb.shape[0], t, cfg["anchors"], cfg["block_size"], device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss, acc = block_loss(drafter, target, cfg, xb, anchors, mask_id, weights)
        losses.append(loss.item())
        accs.append(acc)
    return sum(losses) / len(losses), torch.stack(accs).mean(0).tolist()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", choices=sorted(f for f in FAMILIES if "dflash" in FAMILIES[f]), default="small")
    ap.add_argument("--target", required=True)
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
    cfg = family["dflash"]
    vocab = Tokenizer.from_file(args.tokenizer).get_vocab_size()
    t0 = time.time()
    train = tokenized_split(args.tokenizer, args.data, "train")
    val, train = train[::100], [d for i, d in enumerate(train) if i % 100]
    counts = np.bincount(np.concatenate([ids for _, ids in train]), minlength=vocab)
    mask_id = int(np.argmin(counts))
    print(f"train_dflash: {sum(len(x) for _, x in train)} training tokens ({time.time() - t0:.0f} s); mask token "
          f"{mask_id}, used {counts[mask_id]} times", file=sys.stderr)

    target = load_target(args.target, family["models"]["target"], vocab).to(device).eval()
    for p in target.parameters():
        p.requires_grad_(False)
    drafter = DFlashDrafter(cfg).to(device)
    drafter.init_from(target)
    weights = torch.exp(-torch.arange(cfg["block_size"] - 1, device=device, dtype=torch.float32) / cfg["gamma"])
    decay = [p for p in drafter.parameters() if p.dim() >= 2]
    no_decay = [p for p in drafter.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=cfg["lr"], betas=(0.9, 0.95), fused=True)
    spent, step, tokens, best = 0.0, 0, 0, (float("inf"), None)
    if os.path.exists(args.ckpt):
        state = torch.load(args.ckpt, map_location=device)
        drafter.load_state_dict(state["latest"])
        opt.load_state_dict(state["opt"])
        spent, step, tokens, best = state["spent"], state["step"], state["tokens"], (state["val_loss"], state["model"])
        print(f"train_dflash: resumed at step {step}, {spent / 60:.1f} of {args.budget} min spent", file=sys.stderr)
    n_params = sum(p.numel() for p in drafter.parameters())
    print(f"train_dflash: {args.family} dflash: {n_params / 1e6:.2f}M parameters, {cfg}", file=sys.stderr)

    budget_s, chunk_s = args.budget * 60, args.chunk * 60
    spent0, step0 = spent, step
    loader = batches(train, args.seed * 1000 + step, family["mix"], cfg["batch"], cfg["context"])
    gen = torch.Generator(device=device).manual_seed(args.seed * 1000 + step)
    seen, last_print, last_val = 0, time.time(), time.time()
    while spent < budget_s and spent - spent0 < chunk_s:
        lr = learning_rate(cfg["lr"], spent, budget_s)
        for g in opt.param_groups:
            g["lr"] = lr
        t = time.time()
        x = next(loader)[:, :cfg["context"]].to(device, non_blocking=True)
        anchors = random_anchors(gen, x.shape[0], x.shape[1], cfg["anchors"], cfg["block_size"], device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss, acc = block_loss(drafter, target, cfg, x, anchors, mask_id, weights)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(drafter.parameters(), 1.0)
        opt.step()
        step += 1
        seen += x.numel()
        tokens += x.numel()
        if step - step0 > 3:
            spent += time.time() - t
        if time.time() - last_val > 45:
            drafter.eval()
            v, vacc = validate(drafter, target, cfg, val, mask_id, weights, device)
            drafter.train()
            if v < best[0]:
                best = (v, {k: p.detach().clone() for k, p in drafter.state_dict().items()})
            print(f"train_dflash: step {step} validation loss {v:.4f} (best {best[0]:.4f}), accuracy by position "
                  + " ".join(f"{a:.2f}" for a in vacc), file=sys.stderr)
            last_val = time.time()
        if time.time() - last_print > 30:
            rate = seen / (time.time() - last_print)
            print(f"train_dflash: step {step} loss {loss.item():.3f} lr {lr:.2e} {rate / 1e3:.0f}k tok/s "
                  f"{spent / 60:.1f}/{args.budget} min, {tokens / 1e6:.0f}M tokens; accuracy "
                  + " ".join(f"{a:.2f}" for a in acc.tolist()[:4]), file=sys.stderr)
            seen, last_print = 0, time.time()
    drafter.eval()
    latest = {k: p.detach().clone() for k, p in drafter.state_dict().items()}
    v, vacc = validate(drafter, target, cfg, val, mask_id, weights, device)
    if v < best[0] or best[1] is None:
        best = (v, latest)
    print(f"train_dflash: step {step}: validation loss {v:.4f}, kept {best[0]:.4f}; {spent / 60:.1f} of "
          f"{args.budget} min spent, {tokens / 1e6:.0f}M context tokens seen; accuracy by position "
          + " ".join(f"{a:.2f}" for a in vacc), file=sys.stderr)
    torch.save({"model": best[1], "latest": latest, "opt": opt.state_dict(), "spent": spent, "step": step,
                "tokens": tokens, "family": args.family, "mask_id": mask_id, "val_loss": best[0]}, args.ckpt + ".part")
    os.replace(args.ckpt + ".part", args.ckpt)
    if spent < budget_s:
        print("train_dflash: budget not spent yet: the same command continues from the checkpoint", file=sys.stderr)
        sys.exit(UNFINISHED)


if __name__ == "__main__":
    main()
