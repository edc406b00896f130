#!/usr/bin/env python3
"""Writes a trained checkpoint as a GGUF (qwen3 architecture; matrices in the family's type, Q8_0
or Q4_0 with the token embedding in Q8_0; F32 norms) with its tokenizer and chat template, using
the engine's own gguf-py, plus the reference data the CPU-side evaluation compares the engine
against:

  OUT/<name>.gguf         the model
  OUT/reference.json.gz   for 20 held-out chat prompts: the prompt's token ids and PyTorch's
                          top-20 log-probabilities of the next token, computed in float32 from
                          the same rounded weights the GGUF holds; and the tokenizer's ids
                          for every held-out document and chat pair (the engine must match them)

  export.py CKPT.pt tokenizer.json DATA_DIR OUT_DIR NAME [--reference]
"""

import argparse
import gzip
import json
import os
import sys

import numpy as np
import torch

import gguf
from common import CHAT_TEMPLATE, EOT, FAMILIES, GGUF_PRE, IM_END, RMS_EPS, ROPE_BASE, SPECIALS, format_chat
from model import TinyQwen3
from tokenizers import Tokenizer

Q8 = gguf.GGMLQuantizationType.Q8_0
TYPES = {"q8_0": (Q8, gguf.LlamaFileType.MOSTLY_Q8_0),
         "q4_0": (gguf.GGMLQuantizationType.Q4_0, gguf.LlamaFileType.MOSTLY_Q4_0)}


def vocab_of(tok_path):
    spec = json.load(open(tok_path, encoding="utf-8"))
    vocab = spec["model"]["vocab"]
    tokens = [None] * len(vocab)
    for piece, i in vocab.items():
        tokens[i] = piece
    for added in spec["added_tokens"]:
        tokens[added["id"]] = added["content"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
    types = [gguf.TokenType.CONTROL if t in SPECIALS else gguf.TokenType.NORMAL for t in tokens]
    return tokens, types, merges


def add_tokenizer(w, tokens, types, merges):
    """The family's tokenizer keys: byte-level BPE with the Qwen2 split, no BOS added."""
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(GGUF_PRE)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(tokens.index(EOT))
    w.add_eos_token_id(tokens.index(IM_END))
    w.add_pad_token_id(tokens.index(EOT))
    w.add_add_bos_token(False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("tokenizer")
    ap.add_argument("data")
    ap.add_argument("out")
    ap.add_argument("name")
    ap.add_argument("--reference", action="store_true", help="also write reference.json.gz")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    state = torch.load(args.ckpt, map_location="cpu")
    family = FAMILIES[state.get("family", "tiny")]
    cfg = family["models"][state["config"]]
    qtype, ftype = TYPES[cfg["weights"]]
    weights = {k: v.float().numpy() for k, v in state["model"].items()}
    tokens, types, merges = vocab_of(args.tokenizer)

    w = gguf.GGUFWriter(os.path.join(args.out, args.name + ".gguf"), "qwen3")
    w.add_name(args.name)
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
    add_tokenizer(w, tokens, types, merges)
    w.add_chat_template(CHAT_TEMPLATE)

    rounded = {}
    for name, arr in weights.items():
        if arr.ndim == 2:
            # The token embedding is also the output matrix: Q8_0 in every family.
            t = Q8 if name == "token_embd.weight" else qtype
            q = gguf.quants.quantize(arr, t)
            w.add_tensor(name, q, raw_dtype=t)
            rounded[name] = torch.from_numpy(gguf.quants.dequantize(q, t).reshape(arr.shape).copy())
        else:
            w.add_tensor(name, arr.astype(np.float32))
            rounded[name] = torch.from_numpy(arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"export: {args.name}.gguf, {os.path.getsize(os.path.join(args.out, args.name + '.gguf'))} bytes", file=sys.stderr)

    if not args.reference:
        return
    tok = Tokenizer.from_file(args.tokenizer)
    model = TinyQwen3(cfg, len(tokens))
    model.load_state_dict(rounded)
    model.eval()
    chats = [json.loads(line) for line in open(os.path.join(args.data, "chat_test.jsonl"), encoding="utf-8")]
    picked = [c for c in chats if c["kind"] == "code"][:8] + [c for c in chats if c["kind"] == "define"][:4] + \
             [c for c in chats if c["kind"] == "verse"][:4] + [c for c in chats if c["kind"] == "docs"][:4]
    prompts = []
    with torch.no_grad():
        for c in picked:
            text = format_chat(c["messages"][:1], add_generation_prompt=True)
            ids = tok.encode(text).ids
            logprobs = torch.log_softmax(model(torch.tensor([ids]))[0, -1].double(), -1)
            top = torch.topk(logprobs, 20)
            prompts.append({"id": c["id"], "text": text, "ids": ids,
                            "top": [[int(i), float(v)] for v, i in zip(top.values, top.indices)]})
    heldout = {}
    for line in open(os.path.join(args.data, "pretrain_test.jsonl"), encoding="utf-8"):
        r = json.loads(line)
        heldout[r["id"]] = tok.encode(r["text"]).ids
    for c in chats:
        heldout["chat:" + c["id"]] = tok.encode(format_chat(c["messages"])).ids
    with gzip.open(os.path.join(args.out, "reference.json.gz"), "wt", encoding="utf-8") as f:
        json.dump({"prompts": prompts, "tokens": heldout}, f)
    print(f"export: reference for {len(prompts)} prompts and {len(heldout)} held-out texts", file=sys.stderr)


if __name__ == "__main__":
    main()
