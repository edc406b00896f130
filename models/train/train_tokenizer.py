#!/usr/bin/env python3
"""Trains a family's byte-level BPE tokenizer (its vocabulary size from common.FAMILIES) on the
training split (GPU machine, which has the `tokenizers` package): the Qwen2 pre-tokenizer split,
then byte-level BPE, with the chat special tokens. Held-out text is never seen. With
--sample-mb, every k-th text is read, k chosen so that about that many MB are (counting merges
over a few hundred MB takes minutes; a sample of a large corpus gives nearly the same merges).

  train_tokenizer.py DATA_DIR OUT/tokenizer.json [--family tiny|small] [--sample-mb MB]
"""

import argparse
import json
import os
import sys

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

from common import FAMILIES, QWEN2_SPLIT, SPECIALS, format_chat


def texts(data_dir, every):
    with open(f"{data_dir}/pretrain_train.jsonl", encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i % every == 0:
                yield json.loads(line)["text"]
    with open(f"{data_dir}/chat_train.jsonl", encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i % every == 0:
                yield format_chat(json.loads(line)["messages"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("out")
    ap.add_argument("--family", choices=sorted(FAMILIES), default="tiny")
    ap.add_argument("--sample-mb", type=float)
    args = ap.parse_args()
    size = sum(os.path.getsize(f"{args.data}/{n}_train.jsonl") for n in ("pretrain", "chat")) / 1e6
    every = max(1, int(size / args.sample_mb)) if args.sample_mb else 1
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=FAMILIES[args.family]["vocab"], special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts(args.data, every), trainer=trainer)
    tok.save(args.out)
    print(f"train_tokenizer: {tok.get_vocab_size()} tokens from every {every}. training text of {size:.0f} MB "
          f"-> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
