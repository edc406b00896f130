#!/usr/bin/env python3
"""Trains 1bit-tiny's byte-level BPE tokenizer (16384 tokens) on the training split (GPU machine,
which has the `tokenizers` package): the Qwen2 pre-tokenizer split, then byte-level BPE, with the
chat special tokens. Held-out text is never seen.

  train_tokenizer.py DATA_DIR OUT/tokenizer.json
"""

import json
import sys

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

from common import QWEN2_SPLIT, SPECIALS, VOCAB_SIZE, format_chat


def texts(data_dir):
    with open(f"{data_dir}/pretrain_train.jsonl", encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)["text"]
    with open(f"{data_dir}/chat_train.jsonl", encoding="utf-8") as f:
        for line in f:
            yield format_chat(json.loads(line)["messages"])


def main():
    data_dir, out = sys.argv[1], sys.argv[2]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts(data_dir), trainer=trainer)
    tok.save(out)
    print(f"train_tokenizer: {tok.get_vocab_size()} tokens -> {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
