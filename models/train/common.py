"""What training, export and evaluation of the 1bit families (1bit-tiny, 1bit-small) must agree on: the chat format, the special
tokens, the pre-tokenizer and the model shapes. Standard library only."""

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
EOT, IM_START, IM_END = SPECIALS

# The pre-tokenizer split of Qwen2 (a fact of that tokenizer, which the engine knows as
# tokenizer.ggml.pre = "qwen2"): training uses the same regex, so the engine splits text the same
# way before byte-level BPE.
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
GGUF_PRE = "qwen2"

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


# qwen3 shapes: GQA, q/k RMSNorm, RoPE (NeoX), SwiGLU, tied embeddings. A family shares one
# tokenizer (its vocabulary size), one context length and one data mix; "weights" is the GGUF type
# of its matrices (q4_0 keeps the token embedding, which is also the output matrix, in Q8_0).
# "mix" says how often each kind of data appears in one pass of the training stream.
FAMILIES = {
    "tiny": dict(
        vocab=16384, context=1024, batch=64,
        mix={"pretrain:code": 2, "pretrain:docs": 1, "pretrain:words": 0, "pretrain:bible": 1,
             "chat:code": 3, "chat:docs": 2, "chat:define": 0.35, "chat:verse": 0.5},
        models={
            "target": dict(d_model=512, n_layer=8, n_head=8, n_kv_head=4, head_dim=64, d_ff=1408,
                           lr=1.5e-3, weights="q8_0"),
            "draft": dict(d_model=256, n_layer=2, n_head=4, n_kv_head=2, head_dim=64, d_ff=704,
                          lr=3e-3, weights="q8_0"),
        }),
    # 1bit-small: the Python packages of the GPU machine's image join the tiny corpus
    # (package_corpus.py), so code dominates; a drafter of about a tenth of the target.
    "small": dict(
        vocab=32768, context=2048, batch=32,
        mix={"pretrain:packages": 1, "pretrain:code": 2, "pretrain:docs": 1, "pretrain:words": 0,
             "pretrain:bible": 0.5, "chat:code": 1.5, "chat:docs": 2, "chat:define": 0.2, "chat:verse": 0.2},
        models={
            "target": dict(d_model=768, n_layer=16, n_head=12, n_kv_head=4, head_dim=64, d_ff=2560,
                           lr=1e-3, weights="q4_0"),
            "draft": dict(d_model=384, n_layer=4, n_head=6, n_kv_head=2, head_dim=64, d_ff=1024,
                          lr=2e-3, weights="q8_0"),
        },
        # The DFlash drafter (dflash.py): the target's width and layer shape, so that its layers
        # start from the target's last three; it reads the inputs of five target layers.
        dflash=dict(d_model=768, n_layer=3, n_head=12, n_kv_head=4, head_dim=64, d_ff=2560,
                    target_layers=[1, 4, 8, 12, 15], block_size=16, gamma=7.0, anchors=64,
                    context=1024, batch=32, lr=6e-4, weights="q8_0")),
}
ROPE_BASE = 100000.0
RMS_EPS = 1e-6


def param_count(cfg, vocab):
    d, hd = cfg["d_model"], cfg["head_dim"]
    attn = d * hd * (2 * cfg["n_head"] + 2 * cfg["n_kv_head"]) + 2 * hd
    mlp = 3 * d * cfg["d_ff"]
    return vocab * d + cfg["n_layer"] * (attn + mlp + 2 * d) + d
