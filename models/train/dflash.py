"""A DFlash drafter in PyTorch, computing what the engine's `dflash` graph computes, and the shipped
target read back from its GGUF (the drafter learns from the weights the engine runs).

The drafter denoises a block: its first token is the last one the target produced (the anchor, at
position n), the other block_size - 1 are the mask token, and it predicts the tokens at positions
n+1 .. n+block_size-1 in one forward pass. It sees the context only through the target: the inputs
of the target's layers `target_layers` at positions 0 .. n-1, concatenated, fused by fc and a norm
into one hidden state per position, which every drafter layer turns into keys and values (its own
k/v projections, k norm, RoPE at that position). Block tokens attend to that context and to the
whole block (not causally). The drafter has no embedding or output matrix of its own: it uses the
target's (tied in the 1bit families)."""

import gguf
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from common import RMS_EPS, ROPE_BASE
from model import Block, RMSNorm, TinyQwen3, rope


def load_target(path, cfg, vocab):
    """The target of a family with the weights of its GGUF, dequantized to float32."""
    model = TinyQwen3(cfg, vocab)
    state = {}
    for t in gguf.GGUFReader(path).tensors:
        a = gguf.quants.dequantize(t.data, t.tensor_type)
        state[t.name] = torch.from_numpy(np.array(a, dtype=np.float32).reshape(tuple(reversed(t.shape.tolist()))))
    model.load_state_dict(state)
    return model


def target_features(target, tokens, layers):
    """(logits, features): the target's logits and, per position, the inputs of `layers`
    concatenated in that order (layer 0's input is the token embedding)."""
    t = tokens.shape[1]
    pos = torch.arange(t, device=tokens.device, dtype=torch.float32)
    ang = torch.outer(pos, target.inv_freq)
    cos, sin = ang.cos()[None, None], ang.sin()[None, None]
    x = target.token_embd(tokens)
    feats = {}
    for i, b in enumerate(target.blk):
        if i in layers:
            feats[i] = x
        x = b(x, cos.to(x.dtype), sin.to(x.dtype))
    logits = target.output_norm(x) @ target.token_embd.weight.t()
    return logits, torch.cat([feats[i] for i in layers], dim=-1)


class DraftBlock(Block):
    """The target's layer (its weights' names and shapes, so one can start from the other), with
    keys and values also made from the fused context and attention that is not causal."""

    def kv(self, h, cos, sin):
        b, t, _ = h.shape
        k = self.attn_k_norm(self.attn_k(h).view(b, t, self.n_kv, self.hd)).transpose(1, 2)
        v = self.attn_v(h).view(b, t, self.n_kv, self.hd).transpose(1, 2)
        return rope(k, cos, sin), v

    def forward(self, x, ctx_k, ctx_v, cos, sin, mask):
        """x: block tokens' states (b, q, d); ctx_k/ctx_v: the context's keys and values
        (b, kv heads, c, hd); mask: (b, 1, q, c + q), True where a query may look."""
        b, t, _ = x.shape
        h = self.attn_norm(x)
        q = self.attn_q_norm(self.attn_q(h).view(b, t, self.n_head, self.hd)).transpose(1, 2)
        k, v = self.kv(h, cos, sin)
        q = rope(q, cos, sin)
        a = F.scaled_dot_product_attention(q, torch.cat([ctx_k, k], 2), torch.cat([ctx_v, v], 2), attn_mask=mask,
                                           enable_gqa=True)
        x = x + self.attn_output(a.transpose(1, 2).reshape(b, t, self.n_head * self.hd))
        h = self.ffn_norm(x)
        return x + self.ffn_down(F.silu(self.ffn_gate(h)) * self.ffn_up(h))


class DFlashDrafter(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["d_model"]
        self.cfg = cfg
        self.fc = nn.Linear(len(cfg["target_layers"]) * d, d, bias=False)
        self.enc_norm = RMSNorm(d)
        self.blk = nn.ModuleList(DraftBlock(cfg) for _ in range(cfg["n_layer"]))
        self.output_norm = RMSNorm(d)
        hd = cfg["head_dim"]
        inv = 1.0 / (ROPE_BASE ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
        self.register_buffer("inv_freq", inv.float(), persistent=False)

    def init_from(self, target):
        """Starts each layer from one of the target's last layers (the shapes agree), fc small."""
        n = len(self.blk)
        for mine, theirs in zip(self.blk, target.blk[-n:]):
            mine.load_state_dict(theirs.state_dict())
        nn.init.normal_(self.fc.weight, std=0.02)
        self.output_norm.load_state_dict(target.output_norm.state_dict())

    def angles(self, pos):
        ang = pos.float()[..., None] * self.inv_freq  # (b, t, hd/2)
        return ang.cos()[:, None], ang.sin()[:, None]

    def forward(self, embed, feats, ctx_pos, block_tokens, block_pos, mask):
        """embed: the target's embedding (vocab, d); feats (b, c, n_features * d) at ctx_pos (b, c);
        block_tokens and block_pos (b, q); mask (b, 1, q, c + q). Returns the final hidden states
        (b, q, d): logits are these times the target's output matrix."""
        g = self.enc_norm(self.fc(feats))
        ccos, csin = self.angles(ctx_pos)
        bcos, bsin = self.angles(block_pos)
        x = F.embedding(block_tokens, embed)
        for b in self.blk:
            ck, cv = b.kv(g, ccos.to(g.dtype), csin.to(g.dtype))
            x = b(x, ck, cv, bcos.to(x.dtype), bsin.to(x.dtype), mask)
        return self.output_norm(x)


def blocks(tokens, anchors, block, mask_id):
    """For anchors (b, a) into tokens (b, t): the block tokens and positions (b, a * block), the
    labels of positions 1 .. block-1 of each block (b, a, block - 1) and the attention mask over
    context positions 0 .. t-1 and the blocks (b, 1, a * block, t + a * block)."""
    b, t = tokens.shape
    a = anchors.shape[1]
    offs = torch.arange(block, device=tokens.device)
    pos = anchors[:, :, None] + offs  # (b, a, block)
    btok = torch.full_like(pos, mask_id)
    btok[:, :, 0] = torch.gather(tokens, 1, anchors)
    labels = torch.gather(tokens, 1, pos[:, :, 1:].reshape(b, -1)).view(b, a, block - 1)
    ctx = torch.arange(t, device=tokens.device)[None, None, :] < anchors[:, :, None]  # (b, a, t)
    ctx = ctx[:, :, None, :].expand(b, a, block, t).reshape(b, a * block, t)
    own = torch.eye(a, dtype=torch.bool, device=tokens.device).repeat_interleave(block, 0).repeat_interleave(block, 1)
    mask = torch.cat([ctx, own[None].expand(b, -1, -1)], dim=2)[:, None]
    return btok.view(b, -1), pos.view(b, -1), labels, mask
