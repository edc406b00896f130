#!/usr/bin/env python3
"""Writes a trained DFlash drafter (train_dflash.py) as a GGUF of the engine's `dflash`
architecture: fc, the encoder norm and the layers in the family's type (Q8_0), F32 norms, the
target's tokenizer with the mask token, no embedding or output matrix (the engine lends the
target's). Then, with the rounded weights, it simulates on the GPU what the engine does with it
under greedy decoding, for the code prompts evaluate.py drafts with: the target decodes 256
tokens, each step drafts block_size - 1 tokens from the last token and verifies them, and the
accepted count per step is recorded (OUT/dflash-reference.json), the number the engine's
acceptance is compared against.

  export_dflash.py CKPT.pt TARGET.gguf tokenizer.json DATA_DIR OUT_DIR NAME [--prompts N]
"""

import argparse
import json
import os
import sys

import numpy as np
import torch

import gguf
from common import FAMILIES, IM_END, RMS_EPS, ROPE_BASE, format_chat
from dflash import DFlashDrafter, load_target, target_features
from export import TYPES, add_tokenizer, vocab_of
from tokenizers import Tokenizer

# The module names of dflash.py against the engine's tensor names.
RENAME = {"enc_norm.weight": "enc.output_norm.weight"}


def write_gguf(path, name, cfg, family, state, tokens, types, merges, mask_id):
    qtype, ftype = TYPES[cfg["weights"]]
    w = gguf.GGUFWriter(path, "dflash")
    w.add_name(name)
    w.add_context_length(family["context"])
    w.add_embedding_length(cfg["d_model"])
    w.add_block_count(cfg["n_layer"])
    w.add_feed_forward_length(cfg["d_ff"])
    w.add_head_count(cfg["n_head"])
    w.add_head_count_kv(cfg["n_kv_head"])
    w.add_key_length(cfg["head_dim"])
    w.add_value_length(cfg["head_dim"])
    w.add_rope_freq_base(ROPE_BASE)
    w.add_layer_norm_rms_eps(RMS_EPS)
    w.add_file_type(ftype)
    w.add_uint32("dflash.block_size", cfg["block_size"])
    w.add_array("dflash.target_layers", cfg["target_layers"])
    add_tokenizer(w, tokens, types, merges)
    w.add_mask_token_id(mask_id)
    rounded = {}
    for key, t in state.items():
        arr = t.float().cpu().numpy()
        name = RENAME.get(key, key)
        if arr.ndim == 2:
            q = gguf.quants.quantize(arr, qtype)
            w.add_tensor(name, q, raw_dtype=qtype)
            rounded[key] = torch.from_numpy(gguf.quants.dequantize(q, qtype).reshape(arr.shape).copy())
        else:
            w.add_tensor(name, arr.astype(np.float32))
            rounded[key] = torch.from_numpy(arr.copy())
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return rounded


@torch.no_grad()
def simulate(target, drafter, cfg, ids, mask_id, stop_id, n_predict=256):
    """Greedy speculative decoding as the engine runs it with --dflash (p-min 0, the whole block):
    returns (generated tokens, accepted count of each step)."""
    dev = next(target.parameters()).device
    k = cfg["block_size"] - 1
    ctx = list(ids)
    logits, _ = target_features(target, torch.tensor([ctx], device=dev), cfg["target_layers"])
    last = int(logits[0, -1].argmax())
    out, steps = [last], []
    while len(out) < n_predict and last != stop_id:
        n = len(ctx)
        _, feats = target_features(target, torch.tensor([ctx], device=dev), cfg["target_layers"])
        block = torch.tensor([[last] + [mask_id] * k], device=dev)
        pos = torch.arange(n, n + k + 1, device=dev)[None]
        mask = torch.ones(1, 1, k + 1, n + k + 1, dtype=torch.bool, device=dev)
        h = drafter(target.token_embd.weight, feats, torch.arange(n, device=dev)[None], block, pos, mask)
        draft = (h[0, 1:] @ target.token_embd.weight.t()).argmax(-1).tolist()
        seq = ctx + [last] + draft
        vlogits, _ = target_features(target, torch.tensor([seq], device=dev), cfg["target_layers"])
        pred = vlogits[0, n:].argmax(-1).tolist()  # pred[i]: the target's token after seq[n + i]
        accepted = 0
        while accepted < k and draft[accepted] == pred[accepted]:
            accepted += 1
        steps.append(accepted)
        ctx = seq[:n + 1 + accepted]
        new = draft[:accepted] + [pred[accepted]]
        for t in new:
            out.append(t)
            if t == stop_id or len(out) >= n_predict:
                break
        last = out[-1]
    return out, steps


def main():
    ap = argparse.ArgumentParser()
    for a in ("ckpt", "target", "tokenizer", "data", "out", "name"):
        ap.add_argument(a)
    ap.add_argument("--prompts", type=int, default=20, help="code prompts to simulate")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    state = torch.load(args.ckpt, map_location="cpu")
    family = FAMILIES[state["family"]]
    cfg = family["dflash"]
    tokens, types, merges = vocab_of(args.tokenizer)
    path = os.path.join(args.out, args.name + ".gguf")
    rounded = write_gguf(path, args.name, cfg, family, state["model"], tokens, types, merges, state["mask_id"])
    print(f"export_dflash: {args.name}.gguf, {os.path.getsize(path)} bytes, mask token {state['mask_id']}", file=sys.stderr)

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    target = load_target(args.target, family["models"]["target"], len(tokens)).to(dev).eval()
    drafter = DFlashDrafter(cfg)
    drafter.load_state_dict(rounded)
    drafter.to(dev).eval()
    tok = Tokenizer.from_file(args.tokenizer)
    chats = [json.loads(line) for line in open(os.path.join(args.data, "chat_test.jsonl"), encoding="utf-8")]
    prompts = sorted((c for c in chats if c["kind"] == "code"), key=lambda c: c["id"])[:args.prompts]
    rows, drafted, accepted = [], 0, 0
    for c in prompts:
        ids = tok.encode(format_chat(c["messages"][:1], add_generation_prompt=True)).ids
        out, steps = simulate(target, drafter, cfg, ids, state["mask_id"], tokens.index(IM_END))
        rows.append({"id": c["id"], "generated": len(out), "steps": len(steps), "accepted": sum(steps)})
        drafted += len(steps) * (cfg["block_size"] - 1)
        accepted += sum(steps)
    steps = sum(r["steps"] for r in rows)
    summary = {"prompts": len(rows), "steps": steps, "draft_n": drafted, "draft_n_accepted": accepted,
               "acceptance": accepted / drafted, "accepted_per_step": accepted / steps, "rows": rows}
    with open(os.path.join(args.out, "dflash-reference.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(f"export_dflash: simulated greedy drafting, {len(rows)} code prompts: {accepted} of {drafted} drafted "
          f"tokens accepted ({accepted / drafted:.3f}), {accepted / steps:.2f} per step, "
          f"{(accepted + steps) / steps:.2f} tokens per target step", file=sys.stderr)


if __name__ == "__main__":
    main()
