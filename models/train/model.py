"""The 1bit-tiny network in PyTorch, written to compute exactly what the engine's qwen3 graph
computes: RMSNorm, GQA attention with per-head RMSNorm on q and k, NeoX-style RoPE, SwiGLU MLP,
tied input/output embeddings. Tensor names follow the GGUF names so export is a rename-free walk."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import RMS_EPS, ROPE_BASE


class RMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + RMS_EPS)).to(x.dtype) * self.weight


def rope(x, cos, sin):
    """NeoX rotation: the first half of each head pairs with the second half."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, hd = cfg["d_model"], cfg["head_dim"]
        self.n_head, self.n_kv, self.hd = cfg["n_head"], cfg["n_kv_head"], hd
        self.attn_norm = RMSNorm(d)
        self.attn_q = nn.Linear(d, self.n_head * hd, bias=False)
        self.attn_k = nn.Linear(d, self.n_kv * hd, bias=False)
        self.attn_v = nn.Linear(d, self.n_kv * hd, bias=False)
        self.attn_output = nn.Linear(self.n_head * hd, d, bias=False)
        self.attn_q_norm = RMSNorm(hd)
        self.attn_k_norm = RMSNorm(hd)
        self.ffn_norm = RMSNorm(d)
        self.ffn_gate = nn.Linear(d, cfg["d_ff"], bias=False)
        self.ffn_up = nn.Linear(d, cfg["d_ff"], bias=False)
        self.ffn_down = nn.Linear(cfg["d_ff"], d, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        h = self.attn_norm(x)
        q = self.attn_q_norm(self.attn_q(h).view(b, t, self.n_head, self.hd)).transpose(1, 2)
        k = self.attn_k_norm(self.attn_k(h).view(b, t, self.n_kv, self.hd)).transpose(1, 2)
        v = self.attn_v(h).view(b, t, self.n_kv, self.hd).transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.attn_output(a.transpose(1, 2).reshape(b, t, self.n_head * self.hd))
        h = self.ffn_norm(x)
        return x + self.ffn_down(F.silu(self.ffn_gate(h)) * self.ffn_up(h))


class TinyQwen3(nn.Module):
    def __init__(self, cfg, vocab):
        super().__init__()
        self.cfg = cfg
        self.token_embd = nn.Embedding(vocab, cfg["d_model"])
        self.blk = nn.ModuleList(Block(cfg) for _ in range(cfg["n_layer"]))
        self.output_norm = RMSNorm(cfg["d_model"])
        hd = cfg["head_dim"]
        inv = 1.0 / (ROPE_BASE ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
        self.register_buffer("inv_freq", inv.float(), persistent=False)
        self.apply(self._init)
        for b in self.blk:  # scaled residual projections keep deep activations in range
            nn.init.normal_(b.attn_output.weight, std=0.02 / math.sqrt(2 * cfg["n_layer"]))
            nn.init.normal_(b.ffn_down.weight, std=0.02 / math.sqrt(2 * cfg["n_layer"]))

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)

    def forward(self, tokens):
        t = tokens.shape[1]
        pos = torch.arange(t, device=tokens.device, dtype=torch.float32)
        ang = torch.outer(pos, self.inv_freq)
        cos, sin = ang.cos()[None, None], ang.sin()[None, None]
        x = self.token_embd(tokens)
        for b in self.blk:
            x = b(x, cos.to(x.dtype), sin.to(x.dtype))
        return self.output_norm(x) @ self.token_embd.weight.t()
