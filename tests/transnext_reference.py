"""Slow, obvious reference of TransNeXt's attention mixers, for tests only.

Written from the paper's equations (10-14) and Sec. 3 (docs/transnext.md), one query at
a time, sharing nothing with models/transnext.py but the module's parameters: every query gathers its own
window keys and the pooled keys, computes its own relative coordinates and log-CPB bias, and takes one
softmax over the concatenation (the Appendix-A "concat" form). Python loops over positions are the point.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def _l2n(t):
    return t / t.norm(dim=-1, keepdim=True).clamp_min(1e-12)


def _layer_norm(t, ln):
    mean = t.mean(-1, keepdim=True)
    var = ((t - mean) ** 2).mean(-1, keepdim=True)
    return (t - mean) / torch.sqrt(var + ln.eps) * ln.weight + ln.bias


def _linear(t, layer):
    return t @ layer.weight.T + (layer.bias if layer.bias is not None else 0)


def _cpb(attn, rel_h, rel_w):
    """log-CPB bias (heads,) of one relative coordinate, already divided by (pretrain grid - 1) and x8."""
    coords = torch.tensor([rel_h, rel_w], dtype=attn.cpb_fc1.weight.dtype)
    coords = torch.sign(coords) * torch.log2(coords.abs() + 1.0) / math.log2(8)
    return _linear(torch.relu(_linear(coords, attn.cpb_fc1)), attn.cpb_fc2)


def _bins(n, m):
    """Adaptive-pooling bins: output i averages inputs [floor(i*n/m), ceil((i+1)*n/m))."""
    return [(i * n // m, -((-(i + 1) * n) // m)) for i in range(m)]


def _scale(attn, n_keys):
    return F.softplus(attn.temperature).view(-1) * math.log(n_keys)  # (heads,)


def aggregated_attention(attn, x, height, width, pool_size, pretrain_grid):
    """Reference output of ``AggregatedAttention`` for tokens ``x`` (B, H·W, C) on an H×W map.

    ``pool_size`` = (Hp, Wp) of the pooled path, ``pretrain_grid`` = (Hpre, Wpre) the stage grid at the
    pretraining size (normalises the relative coordinates of log-CPB).
    """
    b, n, c = x.shape
    heads, d, ws = attn.num_heads, attn.head_dim, attn.window_size
    r = ws // 2
    hp, wp = pool_size
    q = _l2n(_linear(x, attn.q).view(b, n, heads, d))  # (B, N, h, d)
    kv = _linear(x, attn.kv).view(b, n, 2, heads, d)
    k, v = _l2n(kv[:, :, 0]), kv[:, :, 1]
    qe = attn.query_embedding.view(heads, d) if attn.query_embedding is not None else 0

    # pooled tokens: LN(AvgPool(GELU(sr(x)))) one bin at a time
    sr = F.gelu(x @ attn.sr.weight.view(c, c).T + attn.sr.bias)  # 1x1 conv = per-token linear
    grid = sr.view(b, height, width, c)
    rows, cols = _bins(height, hp), _bins(width, wp)
    pooled = torch.stack([grid[:, r0:r1, c0:c1].mean(dim=(1, 2)) for r0, r1 in rows for c0, c1 in cols], dim=1)
    pooled = _layer_norm(pooled, attn.norm)
    kvp = _linear(pooled, attn.kv).view(b, hp * wp, 2, heads, d)
    kp, vp = _l2n(kvp[:, :, 0]), kvp[:, :, 1]
    key_rows = [(r0 + r1 - 1) / 2 for r0, r1 in rows]  # mean query coordinate of a bin
    key_cols = [(c0 + c1 - 1) / 2 for c0, c1 in cols]

    out = torch.zeros(b, n, heads, d, dtype=x.dtype)
    for i in range(height):
        for j in range(width):
            p = i * width + j
            window = [
                (o, (i + di) * width + (j + dj))
                for o, (di, dj) in enumerate((di, dj) for di in range(-r, r + 1) for dj in range(-r, r + 1))
                if 0 <= i + di < height and 0 <= j + dj < width
            ]
            scale = _scale(attn, len(window) + hp * wp)
            pool_bias = torch.stack(
                [
                    _cpb(attn, (i - kr) / (pretrain_grid[0] - 1) * 8, (j - kc) / (pretrain_grid[1] - 1) * 8)
                    for kr in key_rows
                    for kc in key_cols
                ],
                dim=-1,
            )  # (h, P)
            for h in range(heads):
                qs = (q[:, p, h] + (qe[h] if torch.is_tensor(qe) else 0)) * scale[h]  # (B, d)
                k_cat = torch.stack([k[:, m, h] for _, m in window] + [kp[:, m, h] for m in range(hp * wp)], 1)
                v_cat = torch.stack([v[:, m, h] for _, m in window] + [vp[:, m, h] for m in range(hp * wp)], 1)
                bias = torch.cat([attn.relative_pos_bias_local[h, [o for o, _ in window]], pool_bias[h]])
                weights = torch.softmax(torch.einsum("bd,bkd->bk", qs, k_cat) + bias, dim=-1)
                if attn.learnable_tokens is not None:  # positional attention, after the softmax, q̂ without QE
                    extra = q[:, p, h] @ attn.learnable_tokens[h] + attn.learnable_bias[h, 0]  # (B, k²)
                    extra = extra[:, [o for o, _ in window]]
                    weights = weights + torch.cat([extra, weights.new_zeros(b, hp * wp)], dim=1)
                out[:, p, h] = torch.einsum("bk,bkd->bd", weights, v_cat)
    return _linear(out.reshape(b, n, c), attn.proj)


def full_attention(attn, x, height, width, pretrain_grid):
    """Reference output of the full ``Attention`` (stage 4): every token attends to every token."""
    b, n, c = x.shape
    heads, d = attn.num_heads, attn.head_dim
    qkv = _linear(x, attn.qkv).view(b, n, 3, heads, d)
    q, k, v = _l2n(qkv[:, :, 0]), _l2n(qkv[:, :, 1]), qkv[:, :, 2]
    qe = attn.query_embedding.view(heads, d) if attn.query_embedding is not None else 0
    scale = _scale(attn, n)
    out = torch.zeros(b, n, heads, d, dtype=x.dtype)
    for i in range(height):
        for j in range(width):
            p = i * width + j
            bias = torch.stack(
                [
                    _cpb(attn, (i - ki) / (pretrain_grid[0] - 1) * 8, (j - kj) / (pretrain_grid[1] - 1) * 8)
                    for ki in range(height)
                    for kj in range(width)
                ],
                dim=-1,
            )
            for h in range(heads):
                qs = (q[:, p, h] + (qe[h] if torch.is_tensor(qe) else 0)) * scale[h]
                weights = torch.softmax(torch.einsum("bd,bkd->bk", qs, k[:, :, h]) + bias[h], dim=-1)
                out[:, p, h] = torch.einsum("bk,bkd->bd", weights, v[:, :, h])
    return _linear(out.reshape(b, n, c), attn.proj)


def interpolated_pool_bias(attn, reference_grid, reference_pool, pretrain_grid, query_size, key_size):
    """Reference "Interpolate RPE" bias (heads, N, P): log-CPB of every (query, pooled key) pair on the
    ``reference_grid`` × ``reference_pool`` grids, then resized bilinearly to ``query_size`` × ``key_size``.

    Bilinear resizing of different axes commutes, so this resizes the query axes first (the module does the
    key axes first): an ordering or reshape mistake on either side shows up as a mismatch.
    """
    (hq, wq), (hk, wk) = reference_grid, reference_pool
    rows, cols = _bins(hq, hk), _bins(wq, wk)
    key_rows = [(r0 + r1 - 1) / 2 for r0, r1 in rows]
    key_cols = [(c0 + c1 - 1) / 2 for c0, c1 in cols]
    bias = torch.stack(
        [
            torch.stack(
                [
                    _cpb(attn, (i - kr) / (pretrain_grid[0] - 1) * 8, (j - kc) / (pretrain_grid[1] - 1) * 8)
                    for kr in key_rows
                    for kc in key_cols
                ],
                dim=-1,
            )
            for i in range(hq)
            for j in range(wq)
        ],
        dim=1,
    )  # (heads, hq·wq, hk·wk)
    heads = bias.shape[0]
    bias = bias.view(heads, hq, wq, hk * wk).permute(0, 3, 1, 2)  # (heads, P_ref, hq, wq)
    bias = F.interpolate(bias, size=query_size, mode="bilinear", align_corners=False)
    n = query_size[0] * query_size[1]
    bias = bias.reshape(heads, hk, wk, n).permute(0, 3, 1, 2)  # (heads, N, hk, wk)
    bias = F.interpolate(bias, size=key_size, mode="bilinear", align_corners=False)
    return bias.reshape(heads, n, key_size[0] * key_size[1])
