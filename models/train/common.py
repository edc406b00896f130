"""What training, export and evaluation of 1bit-tiny must agree on: the chat format, the special
tokens, the pre-tokenizer and the model shapes. Standard library only."""

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
EOT, IM_START, IM_END = SPECIALS

# The pre-tokenizer split of Qwen2 (a fact of that tokenizer, which the engine knows as
# tokenizer.ggml.pre = "qwen2"): training uses the same regex, so the engine splits text the same
# way before byte-level BPE.
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
GGUF_PRE = "qwen2"
VOCAB_SIZE = 16384

# ChatML, rendered by the engine (--jinja) exactly as format_chat renders it for training.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}"
)


def format_chat(messages, add_generation_prompt=False):
    text = "".join(f"{IM_START}{m['role']}\n{m['content']}{IM_END}\n" for m in messages)
    return text + (f"{IM_START}assistant\n" if add_generation_prompt else "")


# qwen3 shapes: GQA, q/k RMSNorm, RoPE (NeoX), SwiGLU, tied embeddings.
CONFIGS = {
    "target": dict(d_model=512, n_layer=8, n_head=8, n_kv_head=4, head_dim=64, d_ff=1408),
    "draft": dict(d_model=256, n_layer=2, n_head=4, n_kv_head=2, head_dim=64, d_ff=704),
}
CONTEXT = 1024
ROPE_BASE = 100000.0
RMS_EPS = 1e-6

# How often each kind of data appears in one pass of the training stream.
MIX = {"pretrain:code": 2, "pretrain:docs": 1, "pretrain:words": 0, "pretrain:bible": 1,
       "chat:code": 3, "chat:docs": 2, "chat:define": 0.35, "chat:verse": 0.5}


def param_count(cfg, vocab=VOCAB_SIZE):
    d, hd = cfg["d_model"], cfg["head_dim"]
    attn = d * hd * (2 * cfg["n_head"] + 2 * cfg["n_kv_head"]) + 2 * hd
    mlp = 3 * d * cfg["d_ff"]
    return vocab * d + cfg["n_layer"] * (attn + mlp + 2 * d) + d
