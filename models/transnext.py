"""TransNeXt: Robust Foveal Visual Perception for Vision Transformers (Dai Shi, CVPR 2024).

A PVTv2-style 4-stage backbone whose token mixer is *aggregated attention* (AA): every query attends to its
3×3 query-centred window and to a pooled 1/32-resolution map through one shared softmax, with
length-scaled cosine attention (scale softplus(τ)·log N), a query embedding, positional attention
(learnable tokens + bias added after the softmax), a static bias on the window path and a log-spaced
continuous position bias (log-CPB) on the pooled path. Stages whose ``sr_ratio`` is 1 use full attention
with the same query embedding, scaling and log-CPB. The channel mixer is the convolutional GLU; ``ffn="glu"`` /
``"mlp"`` replace it by the plain GLU / a plain MLP of equal parameters (Table 2's channel-mixer steps 4-5).

What this implementation adds to the official one (github.com/DaiShiResearch/TransNeXt):

* **Any input size.** Geometry (window padding mask, effective key counts, CPB coordinate tables) is never
  a parameter or persistent buffer; it is derived from each input's actual stage sizes and cached per
  (stage, size, device). Non-square sizes and sizes not divisible by 32 work; batch elements never interact.
* **Both inference modes** of the paper: ``pool_mode="normal"`` (pool = stage size // sr_ratio, i.e. 1/32
  of the input) and ``"linear"`` (pool fixed, default 1/32 of ``pretrain_size`` = 7×7); and both
  position-bias modes: ``position_bias="extrapolate"`` (log-CPB re-evaluated on the new coordinates) or
  ``"interpolate"`` (bias generated at ``img_size`` and resized bilinearly).
* **A vectorised native window path** that never materialises the k²-times-larger ``unfold`` tensors:
  three small custom ops (``torch.ops.transnext.window_qk/window_av/window_scatter``) with autograd,
  fake (meta) kernels and FLOP formulas, so ``harness.measure.flops`` counts the window products as the paper
  does; in eager mode on real tensors the whole window branch (logits, the shared softmax, positional term, both
  weighted sums) runs as one autograd function on contiguous taps (``_WindowAttention``), equal to those ops.
  When the official ``swattention`` CUDA extension is importable and the tensors are on CUDA, its
  kernels are used for the same two products (``attention_backend``).

Parameter names and shapes are exactly the official ones (``patch_embed{i}``, ``block{i}.{j}.attn.*``,
``mlp.fc1/dwconv.dwconv/fc2``, ``norm{i}``, ``head``), so official checkpoints load with ``strict=True``
at any input size and in any mode (see ``checkpoint_filter_fn`` and docs/transnext.md).

Paper: aggregated attention Sec. 3.1 (eqs. 10-14, length scaling eq. 9, multi-scale input Sec. 3.1.3),
ConvGLU Sec. 3.2 (eq. 19), architecture Sec. 3.3, variants Table 3 (App. C.1), multi-scale inference modes
Sec. 4.1 / App. D.2. What the code relies on beyond the paper (official code's layout and constants, choices
where the paper is silent) is listed in docs/transnext.md; where the paper leaves a procedure open it is a
constructor argument (``length_scaling``, the interpolation reference size ``img_size``).

timm's model API: ``forward_features``/``forward_head``, ``forward_intermediates`` + ``feature_info`` +
``prune_intermediate_layers`` (so ``timm.create_model(name, features_only=True)`` gives the 4 stage maps),
``device``/``dtype`` construction. torch.fx traces it (the attention mixers and the geometry lookup are leaf
modules); TorchScript does not compile it (see docs/transnext.md).
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import sys
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache, partial
from importlib.util import find_spec
from pathlib import Path
from typing import List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
from timm.layers import DropPath, get_device_dtype, to_2tuple, trunc_normal_
from timm.models import build_model_with_cfg, generate_default_cfgs, register_model, register_notrace_module
from timm.models._features import feature_take_indices
from torch import Tensor, nn
from torch.autograd.function import once_differentiable
from torch.utils._python_dispatch import _get_current_dispatch_mode
from torch.utils.flop_counter import register_flop_formula

__all__ = [
    "TransNeXt",
    "AggregatedAttention",
    "Attention",
    "ConvolutionalGLU",
    "GatedLinearUnit",
    "Mlp",
    "FFN_LAYERS",
    "checkpoint_filter_fn",
    "NO_WEIGHT_DECAY_KEYWORDS",
]

# Parameters whose names contain these words get no weight decay (official `no_weight_decay_keywords`).
NO_WEIGHT_DECAY_KEYWORDS = ("query_embedding", "relative_pos_bias_local", "cpb", "temperature")

# ----------------------------------------------------------------------------------------------------
# Window primitives (the sliding-window path of aggregated attention)
#
# Layout: channels-first per head. Queries/keys/values are (B, heads, d, N) and window scores/weights
# (B, heads, k², N), N = H·W row-major; windows are k×k, query-centred, zero-padded, offsets row-major (the
# order of nn.Unfold and of the official kernels). Each op is k² whole-tensor multiply(-add)s, one per window
# offset, over the zero-padded map shifted by that offset: no loop over tokens, windows or row blocks, and no
# k²-times-larger temporary. Why this and not one batched matmul over unfolded windows (the official native
# code, or an as_strided window view): measured on CPU at TransNeXt-Tiny's shapes, batch 8, one thread,
# unfold + matmul is 3-6x slower (1×d by d×k² products are too small for a GEMM, and the unfolded copy is
# k² times q), a single broadcast product over the window view 2-8x slower (its k²-times temporary leaves the
# cache), and the channels-first layout 2x (q·k) to 7x (attn·v) faster than token-major (B, N, heads, d):
# the sum over d is then a vectorised reduction over an outer axis, and attn·v broadcasts contiguous
# (B, heads, 1, N) weight slabs over d (docs/benchmarks.md).
# ----------------------------------------------------------------------------------------------------


def _padded(t: Tensor, height: int, width: int, r: int) -> Tensor:
    """(B, heads, c, N) -> zero-padded (B, heads, c, H+2r, W+2r) copy. Only the border is zeroed: F.pad fills the
    whole buffer and then copies the interior over it, one more pass over the map (1.6-1.9x slower at stage 1)."""
    out = t.new_empty(*t.shape[:-1], height + 2 * r, width + 2 * r)
    out[..., :r, :].zero_()
    out[..., height + r :, :].zero_()
    out[..., r : height + r, :r].zero_()
    out[..., r : height + r, width + r :].zero_()
    out[..., r : height + r, r : width + r].copy_(t.unflatten(-1, (height, width)))
    return out


def _offsets(window: int) -> List[Tuple[int, int, int]]:
    """(offset index, row shift, column shift) of every window position, row-major."""
    return [(o, o // window, o % window) for o in range(window * window)]


@torch.library.custom_op("transnext::window_qk", mutates_args=())
def window_qk(query: Tensor, key: Tensor, height: int, width: int, window: int) -> Tensor:
    """scores[b, h, o, p] = <query[b, h, :, p], key[b, h, :, p + offset_o]>, 0 where the window leaves the map."""
    b, h, d, n = query.shape
    q = query.unflatten(-1, (height, width))
    k = _padded(key, height, width, window // 2)
    out = query.new_empty(b, h, window * window, height, width)
    product = torch.empty_like(q)  # one buffer for every tap's product, not k² fresh allocations of q's size
    for o, i, j in _offsets(window):  # k² taps, each over the whole tensor
        torch.mul(q, k[..., i : i + height, j : j + width], out=product)
        torch.sum(product, dim=2, out=out[:, :, o])
    return out.view(b, h, window * window, n)


@torch.library.custom_op("transnext::window_av", mutates_args=())
def window_av(attn: Tensor, value: Tensor, height: int, width: int, window: int) -> Tensor:
    """out[b, h, :, p] = sum_o attn[b, h, o, p] * value[b, h, :, p + offset_o] (zero outside the map)."""
    b, h, d, n = value.shape
    # contiguous weights (1/d of the data): a token-major view (the softmax's layout, or its gradient in
    # backward) read with stride k²+P in every tap made these products ~4x slower
    a = attn.to(value.dtype).contiguous().unflatten(-1, (height, width)).unsqueeze(3)  # (B, heads, k², 1, H, W)
    v = _padded(value, height, width, window // 2)
    (_, i, j), *taps = _offsets(window)
    out = a[:, :, 0] * v[..., i : i + height, j : j + width]  # the first tap writes out: no zero-filled start
    for o, i, j in taps:
        out.addcmul_(a[:, :, o], v[..., i : i + height, j : j + width])
    return out.view(b, h, d, n)


@torch.library.custom_op("transnext::window_scatter", mutates_args=())
def window_scatter(attn: Tensor, source: Tensor, height: int, width: int, window: int) -> Tensor:
    """The adjoint of window_av in `value`: out[b, h, :, p + offset_o] += attn[b, h, o, p] * source[b, h, :, p]."""
    b, h, d, n = source.shape
    r = window // 2
    a = attn.to(source.dtype).contiguous().unflatten(-1, (height, width)).unsqueeze(3)
    x = source.unflatten(-1, (height, width))
    out = source.new_zeros(b, h, d, height + 2 * r, width + 2 * r)
    for o, i, j in _offsets(window):
        out[..., i : i + height, j : j + width].addcmul_(a[:, :, o], x)
    return out[..., r : r + height, r : r + width].reshape(b, h, d, n)


def window_qk_decomposed(query: Tensor, key: Tensor, height: int, width: int, window: int) -> Tensor:
    """:func:`window_qk` written in plain differentiable ops, for ``torch.compile``: the custom ops are opaque to
    inductor, while these k² shifted products fuse into a few loops over q and k (forward and backward) with no
    k²-times-larger temporary. Eager mode keeps the custom ops (their k² passes are faster without a compiler)."""
    r = window // 2
    q = query.unflatten(-1, (height, width))
    k = F.pad(key.unflatten(-1, (height, width)), (r, r, r, r))
    taps = [(q * k[..., i : i + height, j : j + width]).sum(2) for _, i, j in _offsets(window)]
    return torch.stack(taps, dim=2).flatten(-2)


def window_av_decomposed(attn: Tensor, value: Tensor, height: int, width: int, window: int) -> Tensor:
    """:func:`window_av` in plain differentiable ops, for ``torch.compile`` (see :func:`window_qk_decomposed`)."""
    r = window // 2
    a = attn.to(value.dtype).unflatten(-1, (height, width))  # (B, heads, k², H, W)
    v = F.pad(value.unflatten(-1, (height, width)), (r, r, r, r))
    out = a[:, :, :1] * v[..., :height, :width]
    for o, i, j in _offsets(window)[1:]:
        out = out + a[:, :, o : o + 1] * v[..., i : i + height, j : j + width]
    return out.flatten(-2)


@window_qk.register_fake
def _window_qk_fake(query, key, height, width, window):
    b, h, _, n = query.shape
    return query.new_empty(b, h, window * window, n)


@window_av.register_fake
def _window_av_fake(attn, value, height, width, window):
    return torch.empty_like(value, memory_format=torch.contiguous_format)


@window_scatter.register_fake
def _window_scatter_fake(attn, source, height, width, window):
    return torch.empty_like(source, memory_format=torch.contiguous_format)


def _save_pair(ctx, inputs, output):
    a, b, ctx.height, ctx.width, ctx.window = inputs
    ctx.save_for_backward(a, b)


def _window_qk_backward(ctx, grad):
    query, key = ctx.saved_tensors
    geo = (ctx.height, ctx.width, ctx.window)
    grad_q = window_av(grad, key, *geo) if ctx.needs_input_grad[0] else None
    grad_k = window_scatter(grad, query, *geo) if ctx.needs_input_grad[1] else None
    return grad_q, grad_k, None, None, None


def _window_av_backward(ctx, grad):
    attn, value = ctx.saved_tensors
    geo = (ctx.height, ctx.width, ctx.window)
    grad_a = window_qk(grad, value, *geo).to(attn.dtype) if ctx.needs_input_grad[0] else None
    grad_v = window_scatter(attn, grad, *geo) if ctx.needs_input_grad[1] else None
    return grad_a, grad_v, None, None, None


def _window_scatter_backward(ctx, grad):
    attn, source = ctx.saved_tensors
    geo = (ctx.height, ctx.width, ctx.window)
    grad_a = window_qk(source, grad, *geo).to(attn.dtype) if ctx.needs_input_grad[0] else None
    grad_x = window_av(attn, grad, *geo) if ctx.needs_input_grad[1] else None
    return grad_a, grad_x, None, None, None


window_qk.register_autograd(_window_qk_backward, setup_context=_save_pair)
window_av.register_autograd(_window_av_backward, setup_context=_save_pair)
window_scatter.register_autograd(_window_scatter_backward, setup_context=_save_pair)


def _window_flops(a_shape, b_shape, height, width, window, *args, **kwargs) -> int:
    # torch's unit (2 per multiply-add): one MAC per (batch, head, channel, position, offset), like the
    # official native code's batched matmuls over unfolded windows
    b, h, d, n = b_shape  # the second operand is always (B, heads, head_dim, N)
    return 2 * b * n * h * d * window * window


for _op in (torch.ops.transnext.window_qk, torch.ops.transnext.window_av, torch.ops.transnext.window_scatter):
    register_flop_formula(_op)(_window_flops)


# ----------------------------------------------------------------------------------------------------
# The whole window branch as one autograd function (eager, CPU and CUDA without swattention)
#
# Layout: every per-position map is kept on a *flat padded grid*: the H×W map zero-padded by r = k//2 on each
# side (Hp × Wp, Wp = W + 2r), flattened, with r more zeros at each end. On that grid the key of window offset
# (i, j) of the query at flat index p is at p + (i - r)·Wp + (j - r): a constant shift, so every tap is one
# product of two *contiguous* 1-D slices of length H·Wp (the rows of the map with their padding columns),
# instead of a 2-D strided window whose rows are only W long (14 at stage 3, where a tap's inner loop was
# mostly loop overhead). The 2r padding columns per row are computed and dropped (Wp/W = 1.14 at stage 3).
# The adjoint products (the gradients of the keys and values) are gathers over the same shifts, reading the
# zero-padded weights: no zero-filled accumulator, no scatter.
# ----------------------------------------------------------------------------------------------------


def _flat_grid(height: int, width: int, window: int) -> Tuple[int, int, int, List[Tuple[int, int]]]:
    """(Wp, length of the flat padded grid, start of the band of map rows, [(shift in, shift out)] per offset):
    tap o reads ``grid[in_o : in_o + H·Wp]`` for the queries' band, and the gather (adjoint) reads
    ``grid[out_o : out_o + H·Wp]``."""
    r = window // 2
    wp = width + 2 * r
    length = (height + 2 * r) * wp + 2 * r
    band = r + r * wp
    taps = [(i * wp + j, (2 * r - i) * wp + 2 * r - j) for _, i, j in _offsets(window)]
    return wp, length, band, taps


def _to_flat_grid(t: Tensor, height: int, width: int, window: int) -> Tensor:
    """(..., N) -> (..., flat padded grid) copy, zero outside the map; ``t`` may be strided."""
    r = window // 2
    wp, length, _, _ = _flat_grid(height, width, window)
    out = t.new_empty(*t.shape[:-1], length)
    grid = out[..., r : length - r].unflatten(-1, (height + 2 * r, wp))
    out[..., : r + r * wp + r].zero_()  # the leading margin, the top padding rows and the first row's left columns
    out[..., length - r - r * wp - r :].zero_()
    grid[..., r : height + r - 1, width + r :].zero_()  # each row's right columns
    grid[..., r + 1 : height + r, :r].zero_()  # and the next row's left ones
    grid[..., r : height + r, r : width + r].copy_(t.unflatten(-1, (height, width)))
    return out


def _band_interior(t: Tensor, height: int, width: int, window: int) -> Tensor:
    """(..., H·Wp) band -> its (..., H, W) map columns, a strided view."""
    r = window // 2
    return t.unflatten(-1, (height, width + 2 * r))[..., r : r + width]


def _flat_taps_dot(a: Tensor, b: Tensor, starts: List[int], band: int, n: int, out: Tensor) -> Tensor:
    """out[..., o, :] = sum_c a[..., c, band:band+n] * b[..., c, start_o:start_o+n]: the k² window dot products."""
    a = a[..., band : band + n]
    product = torch.empty_like(a)
    for o, start in enumerate(starts):
        torch.mul(a, b[..., start : start + n], out=product)
        torch.sum(product, dim=-2, out=out[..., o, :])
    return out


def _flat_taps_sum(weights: Tensor, b: Tensor, w_starts: List[int], b_starts: List[int], n: int) -> Tensor:
    """sum_o weights[..., o:o+1, w_o:w_o+n] * b[..., :, b_o:b_o+n]: the weighted sums over the window (and their
    adjoint, a gather with the opposite shifts)."""
    (w0, b0), *rest = zip(w_starts, b_starts)
    out = weights[..., 0:1, w0 : w0 + n] * b[..., b0 : b0 + n]
    for o, (ws, bs) in enumerate(rest, start=1):
        out.addcmul_(weights[..., o : o + 1, ws : ws + n], b[..., bs : bs + n])
    return out


class _WindowAttention(torch.autograd.Function):
    """Aggregated attention's window branch and softmax in one function, with a hand-written backward:

    logits = [q·k over the window + ``bias_local`` | ``logits_pool``], A = softmax(logits),
    x = window_av(A_local + ``pos``, v) + v_poolᵀ · A_poolᵀ.

    Shapes: q, k, v (B, heads, d, N); bias_local (heads, k², N) (static bias and the -inf outside the map);
    logits_pool (B, heads, N, P); v_pool (B, heads, P, d); pos (B, heads, k², N) or None (positional attention,
    added after the softmax). Returns x (B, heads, d, N). The same function as the custom-op path in
    AggregatedAttention.forward (tests/models/test_transnext.py compares them and gradchecks this one)."""

    @staticmethod
    def forward(ctx, q, k, v, bias_local, logits_pool, v_pool, pos, height, width, window):
        b, heads, d, n = q.shape
        taps = window * window
        wp, _, band, shifts = _flat_grid(height, width, window)
        starts_in = [s for s, _ in shifts]
        rows = height * wp
        qf, kf, vf = (_to_flat_grid(t, height, width, window) for t in (q, k, v))
        local = _flat_taps_dot(qf, kf, starts_in, band, rows, q.new_empty(b, heads, taps, rows))
        logits = q.new_empty(b, heads, n, taps + logits_pool.shape[-1])
        torch.add(
            _band_interior(local, height, width, window),
            bias_local.unflatten(-1, (height, width)),
            out=logits[..., :taps].transpose(-2, -1).unflatten(-1, (height, width)),
        )
        del local
        logits[..., taps:] = logits_pool
        attn = torch.softmax(logits, dim=-1)
        del logits
        weights = attn[..., :taps].transpose(-2, -1)  # (B, heads, k², N) view
        if pos is not None:
            weights = weights + pos
        wf = _to_flat_grid(weights, height, width, window)
        del weights
        x_local = _flat_taps_sum(wf, vf, [band] * taps, starts_in, rows)
        x = torch.matmul(v_pool.transpose(-2, -1), attn[..., taps:].transpose(-2, -1))
        x.unflatten(-1, (height, width)).add_(_band_interior(x_local, height, width, window))
        # q and k themselves, not their padded copies: the pooled path and the L2 norm keep them alive anyway, so
        # backward pads them again (two copies) instead of holding two more maps per block; v's padded copy
        # replaces v (nothing else keeps v)
        ctx.save_for_backward(q, k, vf, wf, attn, v_pool)
        ctx.geometry = (height, width, window)
        ctx.has_pos = pos is not None
        return x

    @staticmethod
    def backward(ctx, grad):
        q, k, vf, wf, attn, v_pool = ctx.saved_tensors
        height, width, window = ctx.geometry
        need = ctx.needs_input_grad
        b, heads, d, n = grad.shape
        taps = window * window
        wp, _, band, shifts = _flat_grid(height, width, window)
        starts_in, starts_out = [s for s, _ in shifts], [s for _, s in shifts]
        rows = height * wp

        def interior(t: Tensor) -> Tensor:  # band -> contiguous (..., N)
            return _band_interior(t, height, width, window).flatten(-2)

        gf = _to_flat_grid(grad, height, width, window)
        grad_weights = _flat_taps_dot(gf, vf, starts_in, band, rows, grad.new_empty(b, heads, taps, rows))
        grad_attn = grad.new_empty(attn.shape)
        grad_attn[..., :taps].transpose(-2, -1).unflatten(-1, (height, width)).copy_(
            _band_interior(grad_weights, height, width, window)
        )
        grad_pos = interior(grad_weights).contiguous() if ctx.has_pos and need[6] else None
        del grad_weights
        grad_attn[..., taps:] = torch.matmul(grad.transpose(-2, -1), v_pool.transpose(-2, -1))
        grad_v_pool = torch.matmul(attn[..., taps:].transpose(-2, -1), grad.transpose(-2, -1)) if need[5] else None
        grad_v = interior(_flat_taps_sum(wf, gf, starts_out, starts_out, rows)) if need[2] else None
        del gf
        grad_logits = torch._softmax_backward_data(grad_attn, attn, -1, attn.dtype)
        del grad_attn
        grad_local = grad_logits[..., :taps].transpose(-2, -1)  # (B, heads, k², N) view
        grad_bias = grad_local.sum(0) if need[3] else None
        grad_pool = grad_logits[..., taps:] if need[4] else None
        gl = _to_flat_grid(grad_local, height, width, window)
        grad_q = grad_k = None
        if need[0]:
            kf = _to_flat_grid(k, height, width, window)
            grad_q = interior(_flat_taps_sum(gl, kf, [band] * taps, starts_in, rows))
            del kf
        if need[1]:
            grad_k = interior(_flat_taps_sum(gl, _to_flat_grid(q, height, width, window), starts_out, starts_out, rows))
        return grad_q, grad_k, grad_v, grad_bias, grad_pool, grad_v_pool, grad_pos, None, None, None


CPU_WINDOW_KERNEL = True  # False: the CPU runs the PyTorch ops above instead (e.g. to compare the two)
CPU_CONVGLU_KERNEL = True  # the same for ConvGLU's tail (_GatedConvFC, ConvolutionalGLU's inference)
_CPU_KERNEL_SOURCES = Path(__file__).with_name("csrc")
# the kernels' compile flags per CPU capability (torch's own dispatch level): one build per capability, so a home
# directory shared by cluster nodes of different CPUs never hands a node instructions it lacks
_CPU_KERNEL_FLAGS = {
    "AVX512": ["-mavx512f", "-mavx512vl", "-mavx512bw", "-mavx512dq", "-mavx2", "-mfma"],
    "AVX2": ["-mavx2", "-mfma"],
}


@lru_cache(maxsize=None)
def cpu_window_kernels():
    """The window branch's CPU kernels (models/csrc/transnext_window.cpp), compiled on first use into torch's
    extension cache (``TORCH_EXTENSIONS_DIR``, by default ~/.cache/torch_extensions; ~30 s once per machine, CPU
    capability, torch and checkout), or None where they cannot be built -- no compiler, say: a warning says so once
    and the PyTorch ops compute the branch, with the same results (tests/models/test_transnext.py)."""
    return _cpu_extension("transnext_window", "window kernel")


@lru_cache(maxsize=None)
def cpu_convglu_kernels():
    """ConvGLU's CPU kernels (models/csrc/transnext_convglu.cpp), built and falling back as
    :func:`cpu_window_kernels`. They are written with ATen's vector types (``at::vec::Vectorized``), so they are
    compiled at torch's own capability level (``CPU_CAPABILITY``): AVX512 or AVX2 vectors, not the scalar loops of
    the generic fallback."""
    capability = re.sub(r"[^0-9A-Z]+", "", torch.backends.cpu.get_cpu_capability().upper())
    level = (
        [f"-DCPU_CAPABILITY={capability}", f"-DCPU_CAPABILITY_{capability}"] if capability in _CPU_KERNEL_FLAGS else []
    )
    return _cpu_extension("transnext_convglu", "ConvGLU kernel", level)


def _cpu_extension(stem: str, what: str, defines: Sequence[str] = ()):
    """models/csrc/``stem``.cpp compiled and loaded (torch.utils.cpp_extension), or None with one warning."""
    # its import logs "No CUDA runtime is found" on a CUDA build of torch without a GPU: true, and irrelevant to a
    # CPU-only extension
    cpp_logger = logging.getLogger("torch.utils.cpp_extension")
    level = cpp_logger.level
    cpp_logger.setLevel(logging.ERROR)
    try:
        from torch.utils import cpp_extension  # lazy: only TransNeXt on the CPU needs it, and it imports setuptools
    except Exception as e:  # a machine without setuptools, e.g.: the PyTorch ops compute the branch
        warnings.warn(f"TransNeXt: the CPU {what} cannot be built here ({e}); the PyTorch ops run instead")
        return None
    finally:
        cpp_logger.setLevel(level)

    capability = torch.backends.cpu.get_cpu_capability()
    # one build per source, torch and checkout (clones sharing a home directory do not rebuild over each other's),
    # and per CPU capability
    source = (_CPU_KERNEL_SOURCES / f"{stem}.cpp").resolve()
    digest = hashlib.sha1(source.read_bytes() + f"{torch.__version__} {source}".encode()).hexdigest()[:10]
    name = f"depthbench_{stem}_{re.sub(r'[^0-9a-z]+', '_', capability.lower())}_{digest}"
    try:  # torch's cache layout (<root>/py311_cu130/<name>, or $TORCH_EXTENSIONS_DIR/<name>); private, hence guarded
        build_dir = Path(cpp_extension._get_build_directory(name, False))
    except Exception:
        build_dir = None
    if build_dir is not None and not any(build_dir.glob(f"{name}*.so")):
        print(f"TransNeXt: compiling the CPU {what} for {capability} (once, ~30 s) in {build_dir}", file=sys.stderr)
    try:
        return cpp_extension.load(
            name=name,
            sources=[str(source)],
            # -fopenmp: at::parallel_for is inline (ATen/ParallelOpenMP.h) and runs on one thread without it
            extra_cflags=["-O3", "-fopenmp", *_CPU_KERNEL_FLAGS.get(capability, []), *defines],
            extra_ldflags=["-fopenmp"],
            verbose=False,
        )
    except Exception as e:  # any failure to build or load: the kernel is an acceleration, the ops remain
        warnings.warn(
            f"TransNeXt: the CPU {what} did not build ({_build_failure(e)}); the PyTorch ops run instead "
            f"(the build's files: {build_dir})"
        )
        return None


def _build_failure(error: Exception) -> str:
    """The line of a failed build's output that says why (a compiler's "error", a missing tool), else its last."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    said = [line for line in lines if re.search(r"error:|not found|no such file|permission denied", line, re.I)]
    return said[0] if said else lines[-1] if lines else type(error).__name__


def _cpu_kernel_applies(t: Tensor) -> bool:
    return CPU_WINDOW_KERNEL and t.device.type == "cpu" and t.dtype in (torch.float32, torch.float64)


class _WindowAttentionCPU(torch.autograd.Function):
    """:class:`_WindowAttention` (same arguments, same results) computed by the compiled CPU kernels: each (image,
    head) in one pass over its maps, forward and backward, instead of k² passes over the whole batch per product.
    The pooled products stay PyTorch's (BLAS), and so does the softmax (ATen's, called by the kernel)."""

    @staticmethod
    def forward(ctx, q, k, v, bias_local, logits_pool, v_pool, pos, height, width, window):
        kernels = cpu_window_kernels()
        b, heads, d, n = q.shape
        taps = window * window

        def grouped(t: Tensor) -> Tensor:  # (B, heads, ...) -> contiguous (B·heads, ...)
            return t.reshape(b * heads, *t.shape[2:]).contiguous()

        q, k, v, v_pool = grouped(q), grouped(k), grouped(v), grouped(v_pool)
        pos = grouped(pos) if pos is not None else q.new_empty(0)
        attn = kernels.window_attention(q, k, bias_local.contiguous(), grouped(logits_pool), height, width, window)
        x = kernels.window_values(attn, pos, v, height, width, window)
        x.baddbmm_(v_pool.transpose(-2, -1), attn[..., taps:].transpose(-2, -1))  # + the pooled values' sum
        ctx.save_for_backward(q, k, v, attn, pos, v_pool)
        ctx.geometry = (b, heads, height, width, window)
        return x.view(b, heads, d, n)

    @staticmethod
    @once_differentiable  # the kernels' backward is not itself differentiable: a double backward raises
    def backward(ctx, grad):
        q, k, v, attn, pos, v_pool = ctx.saved_tensors
        b, heads, height, width, window = ctx.geometry
        need = ctx.needs_input_grad
        taps, n, d = window * window, q.shape[-1], q.shape[1]
        grad = grad.reshape(b * heads, d, n).contiguous()
        grad_attn_pool = torch.matmul(grad.transpose(-2, -1), v_pool.transpose(-2, -1))  # (B·heads, N, P)
        grad_v_pool = attn[..., taps:].transpose(-2, -1) @ grad.transpose(-2, -1) if need[5] else None
        grad_logits, grad_pos, grad_q, grad_k, grad_v = cpu_window_kernels().window_backward(
            grad, grad_attn_pool, q, k, v, attn, pos, height, width, window
        )
        pool = attn.shape[-1] - taps
        grad_bias = grad_logits.view(b, heads, n, -1)[..., :taps].sum(0).transpose(-2, -1) if need[3] else None
        return (
            grad_q.view(b, heads, d, n) if need[0] else None,
            grad_k.view(b, heads, d, n) if need[1] else None,
            grad_v.view(b, heads, d, n) if need[2] else None,
            grad_bias,
            grad_logits[..., taps:].view(b, heads, n, pool) if need[4] else None,
            grad_v_pool.view(b, heads, pool, d) if grad_v_pool is not None else None,
            grad_pos.view(b, heads, taps, n) if pos.numel() and need[6] else None,
            None,
            None,
            None,
        )


# ----------------------------------------------------------------------------------------------------
# The log-CPB MLP over its coordinate grid
# ----------------------------------------------------------------------------------------------------


def _cpb_hidden(axis_h: Tensor, axis_w: Tensor, w1: Tensor, b1: Tensor) -> Tensor:
    """ReLU(fc1(table)) over the grid ``table[u, v] = (axis_h[u], axis_w[v])``: (Uh, Uw, hidden). fc1 of a grid
    point is a per-row term plus a per-column term, so this is one broadcast sum, not a GEMM with K = 2."""
    rows = torch.addcmul(b1, axis_h[:, None], w1[:, 0])  # (Uh, hidden): b1 + a_u·w1[:, 0]
    cols = axis_w[:, None] * w1[:, 1]  # (Uw, hidden)
    return (rows[:, None, :] + cols[None, :, :]).clamp_min_(0)


def _cpb_row_chunks(axis_h: Tensor, axis_w: Tensor, w1: Tensor, elements: int = 1 << 18):
    """Row ranges of the grid whose hidden maps have ~``elements`` values (1 MiB in fp32): cache-sized pieces."""
    step = max(1, elements // max(1, axis_w.shape[0] * w1.shape[0]))
    return [(lo, min(lo + step, axis_h.shape[0])) for lo in range(0, axis_h.shape[0], step)]


@torch.library.custom_op("transnext::cpb_mlp", mutates_args=())
def cpb_mlp(axis_h: Tensor, axis_w: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor) -> Tensor:
    """The log-CPB MLP ``fc2(ReLU(fc1(table)))`` on the coordinate grid ``table[u·Uw + v] = (axis_h[u],
    axis_w[v])`` of :func:`relative_position_cpb`: (Uh·Uw, heads), the official MLP's values up to rounding.

    Why an op: the MLP runs once per block and training step, independent of the batch, on up to 10,816 grid
    points × 512 hidden units (stage 1 at 224²), and autograd's version was made of skinny GEMMs (K = 2 in
    fc1, K = heads in fc2's input gradient, N = 2 in fc1's weight gradient) and 22 MB temporaries per block.
    Here fc1 is a broadcast sum (:func:`_cpb_hidden`), fc1's weight gradient two reductions over the grid's
    rows and columns, the grid is processed in cache-sized row chunks, and the hidden map is recomputed in
    backward instead of saved. The FLOP formula counts the two linear layers as before (the paper's count)."""
    uw, heads = axis_w.shape[0], w2.shape[0]
    out = w2.new_empty(axis_h.shape[0] * uw, heads)
    for lo, hi in _cpb_row_chunks(axis_h, axis_w, w1):
        hidden = _cpb_hidden(axis_h[lo:hi], axis_w, w1, b1).flatten(0, 1)
        torch.addmm(b2, hidden, w2.t(), out=out[lo * uw : hi * uw])
    return out


@cpb_mlp.register_fake
def _cpb_mlp_fake(axis_h, axis_w, w1, b1, w2, b2):
    return w2.new_empty(axis_h.shape[0] * axis_w.shape[0], w2.shape[0])


def _cpb_mlp_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs[:5])  # not the hidden map: recomputed in backward, chunk by chunk


def _cpb_mlp_backward(ctx, grad):
    axis_h, axis_w, w1, b1, w2 = ctx.saved_tensors
    uw = axis_w.shape[0]
    grad = grad.contiguous()
    grad_w2 = torch.zeros_like(w2)
    rows = w1.new_empty(axis_h.shape[0], w1.shape[0])  # d loss / d fc1 output, summed over each grid row ...
    cols = w1.new_zeros(uw, w1.shape[0])  # ... and over each grid column
    for lo, hi in _cpb_row_chunks(axis_h, axis_w, w1):
        hidden = _cpb_hidden(axis_h[lo:hi], axis_w, w1, b1).flatten(0, 1)
        g = grad[lo * uw : hi * uw]
        grad_w2.addmm_(g.t(), hidden)
        grad_hidden = torch.ops.aten.threshold_backward(g.mm(w2), hidden, 0).view(hi - lo, uw, -1)
        torch.sum(grad_hidden, 1, out=rows[lo:hi])
        cols += grad_hidden.sum(0)
    grad_w1 = torch.stack([axis_h @ rows, axis_w @ cols], dim=1)
    return None, None, grad_w1, rows.sum(0), grad_w2, grad.sum(0)


cpb_mlp.register_autograd(_cpb_mlp_backward, setup_context=_cpb_mlp_setup)


@register_flop_formula(torch.ops.transnext.cpb_mlp)
def _cpb_mlp_flops(h_shape, w_shape, w1_shape, b1_shape, w2_shape, *args, **kwargs) -> int:
    points, (hidden, coords), heads = h_shape[0] * w_shape[0], w1_shape, w2_shape[0]
    return 2 * points * hidden * (coords + heads)  # fc1 and fc2 as linear layers (torch's unit: 2 per MAC)


# Optional CUDA kernels of the official repo (`swattention_extension`, built by the user). Detected with
# importlib (never pkg_resources); used only for CUDA tensors. Their call signature is the official
# `attention_cuda.py` one; a mismatching build is reported once and the native path is used instead.
_SWATTENTION = None
_SWATTENTION_FAILED = False


def swattention_available() -> bool:
    """True when the `swattention` extension can be imported (it is only ever used on CUDA tensors)."""
    global _SWATTENTION
    if _SWATTENTION is None and not _SWATTENTION_FAILED and find_spec("swattention") is not None:
        try:
            import swattention  # noqa: F401

            _SWATTENTION = swattention
        except ImportError as e:
            _disable_swattention(e)
    return _SWATTENTION is not None


def _disable_swattention(error: Exception) -> None:
    global _SWATTENTION, _SWATTENTION_FAILED
    _SWATTENTION, _SWATTENTION_FAILED = None, True
    warnings.warn(
        f"swattention CUDA extension unusable ({type(error).__name__}: {error}); "
        f"falling back to the native window attention",
        RuntimeWarning,
        stacklevel=3,
    )


class _SwQkRpb(torch.autograd.Function):
    @staticmethod
    def forward(ctx, query, key, rpb, height, width, window):
        out = _SWATTENTION.qk_rpb_forward(query, key, rpb, height, width, window, 128)
        ctx.save_for_backward(query, key)
        ctx.geo = (height, width, window)
        return out

    @staticmethod
    def backward(ctx, grad):
        query, key = ctx.saved_tensors
        d_q, d_k, d_rpb = _SWATTENTION.qk_rpb_backward(grad.contiguous(), query, key, *ctx.geo, 128)
        return d_q, d_k, d_rpb, None, None, None


class _SwAv(torch.autograd.Function):
    @staticmethod
    def forward(ctx, attn, value, height, width, window):
        out = _SWATTENTION.av_forward(attn, value, height, width, window, 128)
        ctx.save_for_backward(attn, value)
        ctx.geo = (height, width, window)
        return out

    @staticmethod
    def backward(ctx, grad):
        attn, value = ctx.saved_tensors
        d_a, d_v = _SWATTENTION.av_backward(grad.contiguous(), attn, value, *ctx.geo, 128)
        return d_a, d_v, None, None, None


# ----------------------------------------------------------------------------------------------------
# Dense helpers: channels-first projections, and two autograd functions that save less for backward
# ----------------------------------------------------------------------------------------------------


def _linear_cf(x_t: Tensor, weight: Tensor, bias: Optional[Tensor]) -> Tensor:
    """``F.linear`` applied to a channels-first view: (B, C_in, N) -> contiguous (B, C_out, N).

    The product W·xᵀ is one batched GEMM on the transposed view (no transpose copy on either side), so the
    attention operands come out in the window ops' channels-first layout."""
    b = x_t.shape[0]
    w = weight.expand(b, *weight.shape)
    if bias is None:
        return torch.bmm(w, x_t)
    return torch.baddbmm(bias.view(1, -1, 1), w, x_t)


def _l2_norm(x: Tensor, dim: int) -> Tensor:
    # sqrt(sum(x·x)) rather than torch.linalg.vector_norm: over the head-dim axis of the channels-first layout
    # (an outer axis) vector_norm is ~18x slower on CPU (10.7 vs 0.6 ms at stage 1, batch 8); same value up to
    # rounding (~1e-7 relative)
    return torch.sum(x * x, dim=dim, keepdim=True).sqrt()


class _L2Normalize(torch.autograd.Function):
    """``F.normalize(x, dim=dim)`` (up to rounding, see ``_l2_norm``) that saves only its output and the norm
    for backward, not its input: the raw q and k projections are freed as soon as they are normalised."""

    @staticmethod
    def forward(ctx, x: Tensor, dim: int, eps: float) -> Tensor:
        norm = _l2_norm(x, dim)
        y = x / norm.clamp_min(eps)
        ctx.save_for_backward(y, norm)
        ctx.dim, ctx.eps = dim, eps
        return y

    @staticmethod
    def backward(ctx, grad: Tensor):
        y, norm = ctx.saved_tensors
        # d(x/|x|) = (g - y <y, g>) / |x|; below eps the denominator is the constant eps (clamp_min's gradient)
        radial = (y * grad).sum(ctx.dim, keepdim=True) * (norm >= ctx.eps).to(y.dtype)
        return (grad - y * radial) / norm.clamp_min(ctx.eps), None, None


def l2_normalize(x: Tensor, dim: int = -1, eps: float = 1e-12) -> Tensor:
    if torch.is_grad_enabled() and x.requires_grad:
        return _L2Normalize.apply(x, dim, eps)
    return x / _l2_norm(x, dim).clamp_min(eps)


def _dwconv_tokens(x: Tensor, weight: Tensor, bias: Optional[Tensor], height: int, width: int) -> Tensor:
    """3×3 depthwise conv (stride 1, padding 1) of a (B, N, C) token map, through channels-last views."""
    b, n, c = x.shape
    out = F.conv2d(x.reshape(b, height, width, c).permute(0, 3, 1, 2), weight, bias, 1, 1, 1, c)
    return out.permute(0, 2, 3, 1).reshape(b, n, c)


# On the CPU, the widest maps (ConvGLU's hidden width) are computed a few images at a time, each chunk's map
# within this many bytes: in inference each stage's blocks run on chunks of the batch (TransNeXt._forward_stages),
# in training ConvGLU's tail does (_GatedConvFC). At stage 1 a whole batch's hidden map is ~38 MB (batch 8 at
# 224², fp32), more than the caches hold between the GEMM, the conv, the GELU and the product that pass over it,
# and every such map is freshly allocated and page-faulted in. Measured on the 2-core VM (docs/benchmarks.md,
# "Issue 55, fourth pass"): inference 1.07-1.14x faster, training 1.015-1.03x. Training does not chunk whole
# blocks: that was slower (0.97x). 0 turns chunking off; on CUDA and when compiled the whole batch is one chunk.
CPU_CHUNK_BYTES = 12 << 20


def images_per_chunk(x: Tensor, channels: int, budget: int) -> int:
    """How many images of ``x`` (B, N, ·) at a time keep one ``channels``-wide map of theirs within ``budget``
    bytes, or 0 for the whole batch at once: when ``budget`` is 0, ``x`` is not on the CPU, when compiling (no
    control flow on the batch size there: a dynamic batch stays dynamic), when the whole batch fits, and when one
    image's map alone is larger (high resolutions: chunks would not fit either, and blocks whose position bias is
    too large to cache would recompute it per chunk)."""
    if not budget or x.device.type != "cpu" or torch.compiler.is_compiling():
        return 0
    per_image = x.shape[1] * channels * x.element_size()
    step = budget // per_image if 0 < per_image <= budget else 0
    return step if step < x.shape[0] else 0


def _accumulated(total: Optional[Tensor], part: Optional[Tensor]) -> Optional[Tensor]:
    """``total + part`` of per-chunk parameter gradients, summed in at least fp32 (bf16 chunks under autocast)."""
    if part is None or total is None:
        return total if part is None else part
    return total.to(torch.promote_types(total.dtype, torch.float32)).add_(part)


def _chunks(t: Tensor, step: int):
    """``t`` split into chunks of ``step`` images (:func:`images_per_chunk`), or whole for 0."""
    return t.split(step) if step else (t,)


def _through(blocks: nn.ModuleList, x: Tensor, height: int, width: int, geometry: StageGeometry) -> Tensor:
    for blk in blocks:
        x = blk(x, height, width, geometry)
    return x


def _joined(parts: List[Tensor]) -> Tensor:
    return parts[0] if len(parts) == 1 else torch.cat(parts)


class _GatedConvFC(torch.autograd.Function):
    """ConvGLU's tail ``fc2(GELU(dwconv(gate)) * value)`` that saves only ``gate`` and ``value`` for backward
    and recomputes the depthwise conv and the GELU there: autograd would keep the conv input and output, the
    GELU input, both factors of the product and fc2's input — five hidden-width maps at the highest
    resolution, where TransNeXt spends most of its activation memory (docs/benchmarks.md). The recompute is
    element-wise work and a depthwise conv, no GEMM. Both passes run ``step`` images at a time (0: the whole batch;
    see ``CPU_CHUNK_BYTES``); only the gradients of ``gate`` and ``value`` are full maps."""

    @staticmethod
    def forward(ctx, gate, value, conv_weight, conv_bias, fc_weight, fc_bias, height, width, approximate, step):
        kernels = _convglu_kernels(gate, value, conv_weight, conv_bias, approximate)
        out, buffer = [], None
        for g, v in zip(_chunks(gate, step), _chunks(value, step)):
            if kernels is not None:  # every chunk's hidden map in one buffer: written once, paged in once
                buffer = torch.empty_like(g) if buffer is None else buffer
                hidden = kernels.convglu_forward(
                    g, v, conv_weight, _or_empty(conv_bias, g), height, width, buffer[: len(g)]
                )
            else:
                hidden = F.gelu(_dwconv_tokens(g, conv_weight, conv_bias, height, width), approximate=approximate)
                hidden = hidden.mul_(v)
            out.append(F.linear(hidden, fc_weight, fc_bias))
        ctx.save_for_backward(gate, value, conv_weight, conv_bias, fc_weight)
        ctx.geometry = (height, width, approximate, step)
        return _joined(out)

    @staticmethod
    @once_differentiable  # the CPU kernels' backward is not differentiable: a double backward raises on both paths
    def backward(ctx, grad):
        gate, value, conv_weight, conv_bias, fc_weight = ctx.saved_tensors
        height, width, approximate, step = ctx.geometry
        need = ctx.needs_input_grad
        # under autocast the forward computed in the activations' dtype (bf16/fp16) and backward runs outside it:
        # recompute in that dtype too (the parameters' gradients are cast back to theirs by autograd)
        weights = (conv_weight.to(gate.dtype), conv_bias.to(gate.dtype) if conv_bias is not None else None)
        weights += (fc_weight.to(gate.dtype), height, width, approximate, need)
        grad_fc_bias = grad.flatten(0, -2).sum(0) if need[5] else None
        kernels = _convglu_kernels(gate, value, conv_weight, conv_bias, approximate)
        if kernels is None and not step:  # the ops on the whole batch: their gradients are the full maps
            return (*_gated_conv_fc_backward(gate, value, grad, *weights), grad_fc_bias, None, None, None, None)
        # the full input gradients, written a chunk at a time (the kernels write into them: no copy); the
        # parameters' summed over the chunks
        grad_gate = torch.empty_like(gate) if need[0] else None
        grad_value = torch.empty_like(value) if need[1] else None
        grad_conv_weight = grad_conv_bias = grad_fc_weight = None
        hidden = None  # the kernels' recomputed hidden map, one buffer for every chunk
        images = step or max(1, gate.shape[0])
        for start in range(0, max(1, gate.shape[0]), images):  # once for an empty batch: zero parameter gradients
            part = slice(start, start + images)
            if kernels is not None:
                if need[4] and hidden is None:
                    hidden = torch.empty_like(gate[part])
                g_conv_w, g_conv_b, g_fc_w = _gated_conv_fc_chunk_by_kernels(
                    kernels, gate, value, grad, part, *weights, hidden, grad_gate, grad_value
                )
            else:
                g_gate, g_value, g_conv_w, g_conv_b, g_fc_w = _gated_conv_fc_backward(
                    gate[part], value[part], grad[part], *weights
                )
                for full, chunk in ((grad_gate, g_gate), (grad_value, g_value)):
                    if full is not None:
                        full[part] = chunk
            grad_conv_weight = _accumulated(grad_conv_weight, g_conv_w)
            grad_conv_bias = _accumulated(grad_conv_bias, g_conv_b)
            grad_fc_weight = _accumulated(grad_fc_weight, g_fc_w)
        return (
            grad_gate,
            grad_value,
            grad_conv_weight,
            grad_conv_bias,
            grad_fc_weight,
            grad_fc_bias,
            None,
            None,
            None,
            None,
        )


def _convglu_kernels(gate: Tensor, value: Tensor, conv_weight: Tensor, conv_bias: Optional[Tensor], approximate: str):
    """The ConvGLU CPU kernels where they compute this call (exact GELU, fp32/fp64 on the CPU, one dtype, eager, no
    dispatch mode: FlopCounterMode must see the depthwise conv), else None: the PyTorch ops."""
    if not CPU_CONVGLU_KERNEL or approximate != "none" or torch.compiler.is_compiling():
        return None
    if _get_current_dispatch_mode() is not None:
        return None
    tensors = (gate, value, conv_weight) + ((conv_bias,) if conv_bias is not None else ())
    if gate.dtype not in (torch.float32, torch.float64) or not (gate.is_contiguous() and value.is_contiguous()):
        return None
    if any(t.device.type != "cpu" or t.dtype != gate.dtype for t in tensors):
        return None
    return cpu_convglu_kernels()


def _or_empty(t: Optional[Tensor], like: Tensor) -> Tensor:
    """``t``, or an empty tensor where the kernels take "none" (no bias, an output not wanted)."""
    return t if t is not None else like.new_empty(0)


def _gated_conv_fc_chunk_by_kernels(
    kernels,
    gate,
    value,
    grad,
    part,
    conv_weight,
    conv_bias,
    fc_weight,
    height,
    width,
    approximate,
    need,
    hidden,
    grad_gate,
    grad_value,
):
    """:class:`_GatedConvFC`'s backward on the images ``part`` by the CPU kernels: dL/dgate and dL/dvalue written
    into that part of the full maps, the recomputed hidden map into ``hidden`` (fc2's weight gradient needs it);
    returns the gradients of the conv's weight and bias and of fc2's weight (None where ``need`` says no)."""
    g, g_out = gate[part], grad[part]
    chunk_hidden = hidden[: len(g)] if need[4] else g.new_empty(0)
    g_conv_w, g_conv_b = kernels.convglu_backward(
        g,
        value[part],
        g_out.matmul(fc_weight).contiguous(),
        conv_weight,
        _or_empty(conv_bias, g),
        height,
        width,
        chunk_hidden,
        grad_gate[part] if need[0] else g.new_empty(0),
        grad_value[part] if need[1] else g.new_empty(0),
    )
    g_fc_w = g_out.flatten(0, -2).t().mm(chunk_hidden.flatten(0, -2)) if need[4] else None
    return g_conv_w if need[2] else None, g_conv_b if need[3] and conv_bias is not None else None, g_fc_w


def _gated_conv_fc_backward(gate, value, grad, conv_weight, conv_bias, fc_weight, height, width, approximate, need):
    """:class:`_GatedConvFC`'s backward on one chunk of images (or the whole batch): the gradients of gate, value,
    the conv's weight and bias and fc2's weight (None where ``need`` says no), the conv and GELU recomputed."""
    conv = _dwconv_tokens(gate, conv_weight, conv_bias, height, width)
    act = F.gelu(conv, approximate=approximate)
    grad_fc_weight = grad.flatten(0, -2).t().mm((act * value).flatten(0, -2)) if need[4] else None
    grad_hidden = grad.matmul(fc_weight)
    grad_value = grad_hidden * act if need[1] else None
    del act
    grad_conv = torch.ops.aten.gelu_backward(grad_hidden.mul_(value), conv, approximate=approximate)
    del conv
    b, n, c = gate.shape
    grad_gate, grad_conv_weight, grad_conv_bias = torch.ops.aten.convolution_backward(
        grad_conv.view(b, height, width, c).permute(0, 3, 1, 2),
        gate.reshape(b, height, width, c).permute(0, 3, 1, 2),
        conv_weight,
        [c] if conv_bias is not None else None,
        [1, 1],
        [1, 1],
        [1, 1],
        False,
        [0, 0],
        c,
        [need[0], need[2], need[3] and conv_bias is not None],
    )
    if grad_gate is not None:
        grad_gate = grad_gate.permute(0, 2, 3, 1).reshape(b, n, c)
    return grad_gate, grad_value, grad_conv_weight, grad_conv_bias, grad_fc_weight


# ----------------------------------------------------------------------------------------------------
# Geometry: everything that depends on the input size, derived from it and cached (never in state_dict)
# ----------------------------------------------------------------------------------------------------


def stage_size(size: Tuple[int, int], stage: int, patch_size: int = 4) -> Tuple[int, int]:
    """Token grid of ``stage`` (0-based) for an H×W input, by the overlapping patch embeddings' arithmetic."""
    kernel = 2 * patch_size - 1
    h, w = ((s + 2 * (kernel // 2) - kernel) // patch_size + 1 for s in size)
    for _ in range(stage):
        h, w = (h - 1) // 2 + 1, (w - 1) // 2 + 1
    return h, w


def relative_position_cpb(
    query_size: Tuple[int, int], key_size: Tuple[int, int], pretrain_size: Tuple[int, int]
) -> Tuple[Tensor, Tensor, Tensor]:
    """log-CPB inputs for queries on a ``query_size`` grid and keys adaptively pooled to ``key_size``.

    Key coordinates are the means of the query coordinates in each pooling bin; relative coordinates are
    normalised by the stage grid at ``pretrain_size`` (so larger inputs extrapolate beyond ±8) and
    log-spaced. The h and w offsets are independent, so the unique (Δh, Δw) coordinates are the product of
    the per-axis unique values: ``table`` (Uh·Uw, 2) lists them h-major (the order of the official
    ``torch.unique(dim=0)``), and the pair (query (i, j), key (u, v)) has the coordinate
    ``table[index_h[i, u] * Uw + index_w[j, v]]``. Per-axis indices keep the cache small (the official
    N·P index is 68 M entries for a 1333×800 image) and avoid a sort over all pairs.
    """

    def axis(n_query: int, n_key: int, n_pretrain: int):
        q = torch.arange(n_query, dtype=torch.float64, device="cpu")
        k = F.adaptive_avg_pool1d(q.view(1, 1, -1), n_key).view(-1)
        rel = (q[:, None] - k[None, :]) / max(n_pretrain - 1, 1) * 8
        return torch.unique(rel, sorted=True, return_inverse=True)

    values_h, inverse_h = axis(query_size[0], key_size[0], pretrain_size[0])
    values_w, inverse_w = axis(query_size[1], key_size[1], pretrain_size[1])
    table = torch.stack(torch.meshgrid(values_h, values_w, indexing="ij"), dim=-1).view(-1, 2)
    table = torch.sign(table) * torch.log2(table.abs() + 1.0) / math.log2(8)
    return inverse_h, inverse_w, table


def window_validity(size: Tuple[int, int], window: int) -> Tensor:
    """(N, window²) bool: True where the query-centred window position lies inside the H×W map."""
    h, w = size
    r = window // 2
    offsets = torch.arange(-r, r + 1, device="cpu")
    rows = torch.arange(h, device="cpu")[:, None] + offsets[None, :]  # (H, k)
    cols = torch.arange(w, device="cpu")[:, None] + offsets[None, :]  # (W, k)
    row_ok = (rows >= 0) & (rows < h)
    col_ok = (cols >= 0) & (cols < w)
    return (row_ok[:, None, :, None] & col_ok[None, :, None, :]).reshape(h * w, window * window)


@dataclass
class StageGeometry:
    """Size-dependent tensors of one stage, shared by its blocks.

    ``bias_index_h/w``, ``bias_table`` are the log-CPB inputs (see ``relative_position_cpb``) of the grids
    ``bias_query``×``bias_key``: the actual ones when extrapolating, those at ``img_size`` when interpolating.
    """

    size: Tuple[int, int]
    pool_size: Tuple[int, int]
    seq_length_scale: Tensor  # (N, 1): log of each query's effective key count
    local_mask: Optional[Tensor]  # (N, k²): 0 inside the map, -inf outside (AA stages only)
    bias_index_h: Tensor  # (Hq, Hk) long
    bias_index_w: Tensor  # (Wq, Wk) long
    bias_table: Tensor  # (Uh·Uw, 2)
    bias_table_shape: Tuple[int, int]  # (Uh, Uw)
    bias_query: Tuple[int, int]
    bias_key: Tuple[int, int]


# ----------------------------------------------------------------------------------------------------
# Building blocks
# ----------------------------------------------------------------------------------------------------


class DWConv(nn.Module):
    """3×3 depthwise conv on a token sequence laid out as an H×W map (official name: ``dwconv.dwconv``)."""

    def __init__(self, dim: int, device=None, dtype=None):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 3, 1, 1, bias=True, groups=dim, device=device, dtype=dtype)

    def forward(self, x: Tensor, height: int, width: int) -> Tensor:
        b, n, c = x.shape
        # channels-last views: no transposes, and oneDNN's NHWC depthwise conv is the fast one on CPU
        x = self.dwconv(x.reshape(b, height, width, c).permute(0, 3, 1, 2))
        return x.permute(0, 2, 3, 1).reshape(b, n, c)


class ConvolutionalGLU(nn.Module):
    """ConvGLU (eq. 19): ``fc2( GELU(DWConv(gate)) * value )`` with ``gate, value = fc1(x).chunk(2)``.

    ``hidden_features`` is the nominal MLP width (C·mlp_ratio); the GLU uses 2/3 of it so that the
    parameter count matches an MLP of that width.
    """

    def __init__(
        self,
        in_features: int,
        hidden_features: Optional[int] = None,
        out_features: Optional[int] = None,
        act_layer=nn.GELU,
        drop: float = 0.0,
        device=None,
        dtype=None,
    ):
        super().__init__()
        dd = {"device": device, "dtype": dtype}
        out_features = out_features or in_features
        hidden_features = int(2 * (hidden_features or in_features) / 3)
        self.fc1 = nn.Linear(in_features, hidden_features * 2, **dd)
        self.dwconv = DWConv(hidden_features, **dd)
        self.act = act_layer()
        self.fc2 = nn.Linear(hidden_features, out_features, **dd)
        self.drop = nn.Dropout(drop)

    def forward(self, x: Tensor, height: int, width: int) -> Tensor:
        # = self.fc1(x).chunk(2, -1), as two products so that the gate comes out dense (the depthwise conv
        # would otherwise copy the strided half)
        hidden = self.fc2.in_features
        w, b = self.fc1.weight, self.fc1.bias
        if not torch.is_grad_enabled() and isinstance(x, Tensor):
            # inference: at most two hidden-width maps alive at once (gate and value and the conv and GELU outputs
            # were four: the model's inference peak, in stage 1's ConvGLU). The CPU kernel writes the product into
            # value; the ops compute the gate's half first, each map freed as soon as the next exists.
            gate, conv = F.linear(x, w[:hidden], b[:hidden]), self.dwconv.dwconv
            exact = type(self.act) is nn.GELU and (not self.training or self.drop.p == 0)
            # (value comes from the same linear as gate: gate stands for it in the check)
            kernels = _convglu_kernels(gate, gate, conv.weight, conv.bias, self.act.approximate) if exact else None
            if kernels is not None:
                value = F.linear(x, w[hidden:], b[hidden:])
                bias = _or_empty(conv.bias, gate)
                return self.fc2(kernels.convglu_forward(gate, value, conv.weight, bias, height, width, value))
            gated = self.dwconv(gate, height, width)
            del gate  # (before the GELU's output exists: two maps at most)
            gated = self.act(gated)
            gated = gated.mul_(F.linear(x, w[hidden:], b[hidden:]))
            return self.drop(self.fc2(self.drop(gated)))
        gate = F.linear(x, w[:hidden], b[:hidden])
        value = F.linear(x, w[hidden:], b[hidden:])
        if isinstance(x, Tensor) and type(self.act) is nn.GELU and (not self.training or self.drop.p == 0):
            # training: the same function, saving only gate and value for backward (see _GatedConvFC)
            conv = self.dwconv.dwconv
            step = images_per_chunk(gate, hidden, CPU_CHUNK_BYTES)  # (gate: the hidden map's dtype under autocast)
            x = _GatedConvFC.apply(
                gate,
                value,
                conv.weight,
                conv.bias,
                self.fc2.weight,
                self.fc2.bias,
                height,
                width,
                self.act.approximate,
                step,
            )
            return self.drop(x)
        x = self.act(self.dwconv(gate, height, width)) * value
        x = self.fc2(self.drop(x))
        return self.drop(x)


class GatedLinearUnit(nn.Module):
    """The plain GLU of Table 2's roadmap step 4 ("ConvFFN→GLU"): ``fc2( GELU(gate) * value )`` with ``gate,
    value = fc1(x).chunk(2)`` -- ConvGLU without the 3×3 depthwise conv on the gate (Sec. 3.2: the conv gives
    each token's gate its neighbourhood, step 5 "GLU→ConvGLU"). Same ``fc1``/``fc2`` names, shapes and 2/3 hidden
    width as :class:`ConvolutionalGLU`, so the two differ by the conv's parameters only; it is ConvGLU whose conv
    is a centred delta with zero bias. Not a released model: no checkpoint has this layout.
    """

    def __init__(
        self,
        in_features: int,
        hidden_features: Optional[int] = None,
        out_features: Optional[int] = None,
        act_layer=nn.GELU,
        drop: float = 0.0,
        device=None,
        dtype=None,
    ):
        super().__init__()
        dd = {"device": device, "dtype": dtype}
        out_features = out_features or in_features
        hidden_features = int(2 * (hidden_features or in_features) / 3)  # as ConvolutionalGLU
        self.fc1 = nn.Linear(in_features, hidden_features * 2, **dd)
        self.act = act_layer()
        self.fc2 = nn.Linear(hidden_features, out_features, **dd)
        self.drop = nn.Dropout(drop)

    def forward(self, x: Tensor, height: int, width: int) -> Tensor:
        # the grid size is unused (no spatial op); the argument keeps the blocks' channel-mixer interface
        gate, value = self.fc1(x).chunk(2, dim=-1)  # gate first, as in ConvolutionalGLU
        x = self.fc2(self.drop(self.act(gate) * value))
        return self.drop(x)


class Mlp(nn.Module):
    """A plain MLP channel mixer ``fc2(GELU(fc1(x)))`` at the full nominal width C·mlp_ratio: the ViT/PVT v1
    FFN that the GLUs are sized against (Sec. 3.2: a GLU of 2/3 that width has the MLP's parameters). The paper
    has no plain-MLP row in Table 2 (its step 3 is PVTv2's ConvFFN, this MLP with a depthwise conv after fc1).
    """

    def __init__(
        self,
        in_features: int,
        hidden_features: Optional[int] = None,
        out_features: Optional[int] = None,
        act_layer=nn.GELU,
        drop: float = 0.0,
        device=None,
        dtype=None,
    ):
        super().__init__()
        dd = {"device": device, "dtype": dtype}
        out_features = out_features or in_features
        hidden_features = hidden_features or in_features
        self.fc1 = nn.Linear(in_features, hidden_features, **dd)
        self.act = act_layer()
        self.fc2 = nn.Linear(hidden_features, out_features, **dd)
        self.drop = nn.Dropout(drop)

    def forward(self, x: Tensor, height: int, width: int) -> Tensor:
        x = self.drop(self.act(self.fc1(x)))
        return self.drop(self.fc2(x))


# The block's channel mixer (``ffn=``): the paper's ConvGLU (default; the released checkpoints' layout) and the
# two mixers it is compared with in Table 2's roadmap (steps 4-5) and Sec. 3.2
FFN_LAYERS = {"convglu": ConvolutionalGLU, "glu": GatedLinearUnit, "mlp": Mlp}


def _ffn_layer(ffn: str):
    if ffn not in FFN_LAYERS:
        raise ValueError(f"ffn must be one of {', '.join(repr(k) for k in FFN_LAYERS)}, not {ffn!r}")
    return FFN_LAYERS[ffn]


class _CosineAttentionBase(nn.Module):
    """Parameters and helpers shared by both mixers: learnable temperature, query embedding, log-CPB MLP."""

    def __init__(self, dim: int, num_heads: int, query_embedding: bool = True, device=None, dtype=None):
        super().__init__()
        dd = {"device": device, "dtype": dtype}
        if dim % num_heads:
            raise ValueError(f"dim {dim} is not divisible by num_heads {num_heads}; choose heads that divide it")
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        # softplus(temperature) starts at 1/0.24, the entropy-invariance estimate of the paper (eq. 9)
        self.temperature = nn.Parameter(torch.log((torch.ones(num_heads, 1, 1, **dd) / 0.24).exp() - 1))
        if query_embedding:
            self.query_embedding = nn.Parameter(
                nn.init.trunc_normal_(torch.empty(num_heads, 1, self.head_dim, **dd), mean=0, std=0.02)
            )
        else:
            self.query_embedding = None
        self.cpb_fc1 = nn.Linear(2, 512, bias=True, **dd)
        self.cpb_act = nn.ReLU(inplace=True)
        self.cpb_fc2 = nn.Linear(512, num_heads, bias=True, **dd)

    def scaled_query(self, q_norm: Tensor, geometry: StageGeometry) -> Tensor:
        """(q̂ + QE)·softplus(τ)·log N_eff for token-major queries (B, N, heads, d)."""
        q = q_norm + self.query_embedding.squeeze(1) if self.query_embedding is not None else q_norm
        scale = F.softplus(self.temperature).view(-1, 1) * geometry.seq_length_scale.to(q.dtype).unsqueeze(-1)
        return q * scale  # (heads, 1) x (N, 1, 1) -> (N, heads, 1)

    def scaled_query_cf(self, q_norm: Tensor, geometry: StageGeometry) -> Tensor:
        """The same for channels-first queries (B, heads, d, N)."""
        q = q_norm + self.query_embedding.transpose(1, 2) if self.query_embedding is not None else q_norm
        scale = F.softplus(self.temperature) * geometry.seq_length_scale.to(q.dtype).view(1, 1, -1)
        return q * scale  # (heads, 1, 1) x (1, 1, N) -> (heads, 1, N)

    def position_bias(self, geometry: StageGeometry, num_keys_size: Tuple[int, int]) -> Tensor:
        """(heads, N, P) log-CPB bias, resized bilinearly when the geometry is an interpolation reference.

        Without autograd (inference) the result is kept for the next call with the same geometry and the same
        cpb parameters (their in-place version counters, which optimisers and ``load_state_dict`` bump):
        at a fixed input size the MLP, gathers and resizes run once, not once per forward. With autograd it is
        recomputed every forward (it depends on this block's parameters; each block has its own). Biases
        larger than ``bias_cache_bytes`` are not kept (high resolutions in interpolate mode)."""
        cache_key = None
        params = (self.cpb_fc1.weight, self.cpb_fc1.bias, self.cpb_fc2.weight, self.cpb_fc2.bias)
        if torch.compiler.is_compiling():
            return self._position_bias(geometry, num_keys_size)  # in the compiled graph (no data_ptr keys there)
        if not (torch.is_grad_enabled() and any(p.requires_grad for p in params)):
            cache_key = (
                geometry.size,
                geometry.bias_query,
                geometry.bias_key,
                tuple(num_keys_size),
                str(geometry.bias_table.device),
                self.cpb_fc1.weight.dtype,
                torch.is_inference_mode_enabled(),
                tuple((p.data_ptr(), p._version) for p in params),
            )
            cached = self.__dict__.get("_bias_cache")
            if cached is not None and cached[0] == cache_key:
                return cached[1]
        bias = self._position_bias(geometry, num_keys_size)
        # not on the meta device: nothing is computed there to save, and a FLOP count must see the MLP every time
        if cache_key is not None and not bias.is_meta and bias.numel() * bias.element_size() <= self.bias_cache_bytes:
            self.__dict__["_bias_cache"] = (cache_key, bias)  # a plain attribute: never in the state dict
        return bias

    bias_cache_bytes = 64 << 20

    def _position_bias(self, geometry: StageGeometry, num_keys_size: Tuple[int, int]) -> Tensor:
        uh, uw = geometry.bias_table_shape
        table = geometry.bias_table.to(self.cpb_fc1.weight.dtype).view(uh, uw, 2)  # the (Δh, Δw) grid
        if type(self.cpb_act) is nn.ReLU:
            bias = cpb_mlp(
                table[:, 0, 0],
                table[0, :, 1],
                self.cpb_fc1.weight,
                self.cpb_fc1.bias,
                self.cpb_fc2.weight,
                self.cpb_fc2.bias,
            ).transpose(0, 1)  # (heads, Uh·Uw)
        else:
            bias = self.cpb_fc2(self.cpb_act(self.cpb_fc1(table.flatten(0, 1)))).transpose(0, 1)
        hq, wq = geometry.bias_query
        hk, wk = geometry.bias_key
        index_h, index_w = geometry.bias_index_h, geometry.bias_index_w
        bias = bias.reshape(self.num_heads, *geometry.bias_table_shape)  # (heads, Uh, Uw)
        bias = bias[:, index_h][..., index_w]  # (heads, Hq, Hk, Wq, Wk)
        bias = bias.permute(0, 1, 3, 2, 4).reshape(self.num_heads, hq * wq, hk, wk)
        if (hk, wk) != tuple(num_keys_size):
            bias = F.interpolate(bias, size=num_keys_size, mode="bilinear")
        num_keys = num_keys_size[0] * num_keys_size[1]
        if (hq, wq) != tuple(geometry.size):
            bias = bias.view(self.num_heads, hq, wq, num_keys).permute(0, 3, 1, 2)
            bias = F.interpolate(bias, size=geometry.size, mode="bilinear")
            bias = bias.flatten(2).transpose(1, 2)
        return bias.reshape(self.num_heads, -1, num_keys)


@register_notrace_module  # reason: FX can't trace the size-dependent position bias (control flow on sizes)
class Attention(_CosineAttentionBase):
    """Full MHSA of the ``sr_ratio == 1`` stages: length-scaled cosine attention, query embedding, log-CPB."""

    def __init__(
        self,
        dim: int,
        num_heads: int = 8,
        qkv_bias: bool = True,
        attn_drop: float = 0.0,
        proj_drop: float = 0.0,
        query_embedding: bool = True,
        device=None,
        dtype=None,
    ):
        super().__init__(dim, num_heads, query_embedding, device=device, dtype=dtype)
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias, device=device, dtype=dtype)
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim, device=device, dtype=dtype)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x: Tensor, height: int, width: int, geometry: StageGeometry) -> Tensor:
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.num_heads, self.head_dim)
        q = self.scaled_query(F.normalize(qkv[:, :, 0], dim=-1), geometry).transpose(1, 2)
        k, v = F.normalize(qkv[:, :, 1], dim=-1).transpose(1, 2), qkv[:, :, 2].transpose(1, 2)
        attn = q @ k.transpose(-2, -1) + self.position_bias(geometry, geometry.size)
        attn = self.attn_drop(attn.softmax(dim=-1))
        x = (attn @ v).transpose(1, 2).reshape(b, n, c)
        return self.proj_drop(self.proj(x))


@register_notrace_module  # reason: FX can't trace the size-dependent window/pool geometry (control flow on sizes)
class AggregatedAttention(_CosineAttentionBase):
    """Aggregated attention (eqs. 10–14): window path + pooled path in one softmax, positional attention.

    Per query: scores over its ``window_size``² window (static bias ``relative_pos_bias_local``, -inf
    outside the map) and over the pooled keys σ(X) = LN(AvgPool(GELU(sr(X)))) (log-CPB bias), scaled by
    softplus(τ)·log(N_eff); one softmax; the window weights then get the query-dependent term
    ``q̂ @ learnable_tokens + learnable_bias`` before aggregating the window values.
    """

    def __init__(
        self,
        dim: int,
        num_heads: int = 8,
        window_size: int = 3,
        qkv_bias: bool = True,
        attn_drop: float = 0.0,
        proj_drop: float = 0.0,
        query_embedding: bool = True,
        positional_attention: bool = True,
        attention_backend: str = "auto",
        device=None,
        dtype=None,
    ):
        super().__init__(dim, num_heads, query_embedding, device=device, dtype=dtype)
        dd = {"device": device, "dtype": dtype}
        if window_size % 2 != 1:
            raise ValueError(f"window_size must be odd (query-centred windows), got {window_size}")
        if attention_backend not in ("auto", "native", "swattention"):
            raise ValueError(f"attention_backend must be 'auto', 'native' or 'swattention', not {attention_backend!r}")
        self.window_size = window_size
        self.local_len = window_size**2
        self.attention_backend = attention_backend
        self.q = nn.Linear(dim, dim, bias=qkv_bias, **dd)
        self.kv = nn.Linear(dim, dim * 2, bias=qkv_bias, **dd)
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim, **dd)
        self.proj_drop = nn.Dropout(proj_drop)
        self.sr = nn.Conv2d(dim, dim, kernel_size=1, stride=1, **dd)
        self.norm = nn.LayerNorm(dim, **dd)
        self.act = nn.GELU()
        self.relative_pos_bias_local = nn.Parameter(
            nn.init.trunc_normal_(torch.empty(num_heads, self.local_len, **dd), mean=0, std=0.0004)
        )
        if positional_attention:
            self.learnable_tokens = nn.Parameter(
                nn.init.trunc_normal_(torch.empty(num_heads, self.head_dim, self.local_len, **dd), mean=0, std=0.02)
            )
            self.learnable_bias = nn.Parameter(torch.zeros(num_heads, 1, self.local_len, **dd))
        else:
            self.learnable_tokens = self.learnable_bias = None

    fused_window = True  # False: always the reference path (the custom window ops), e.g. to compare the two

    def _fused_window_applies(self, *tensors: Tensor) -> bool:
        """Whether :class:`_WindowAttention` computes this forward: eager, on real tensors of one dtype, with no
        dispatch mode active (FlopCounterMode counts the window products through the custom ops' formulas, and
        the meta device has no data), no dropout on the attention weights (the function has none), and no
        autocast (its softmax would return fp32 into a bf16/fp16 backward)."""
        return (
            self.fused_window
            and not torch.compiler.is_compiling()
            and not tensors[0].is_meta
            and not torch.is_autocast_enabled(tensors[0].device.type)
            and len({t.dtype for t in tensors}) == 1
            and (not self.training or self.attn_drop.p == 0)
            and _get_current_dispatch_mode() is None
        )

    def _use_swattention(self, x: Tensor) -> bool:
        if self.attention_backend == "native" or x.device.type != "cuda":
            return False
        if self.attention_backend == "swattention" and not swattention_available():
            raise RuntimeError(
                "attention_backend='swattention' but the swattention extension is not importable; "
                "build it from the official repo's swattention_extension/ or use 'auto'"
            )
        return swattention_available()

    def forward(self, x: Tensor, height: int, width: int, geometry: StageGeometry) -> Tensor:
        b, n, c = x.shape
        heads, d, window = self.num_heads, self.head_dim, self.window_size
        # channels-first per head (B, heads, d, N), the window ops' layout: the projections are W·xᵀ GEMMs
        # that write it directly; k and v are two products so that v does not keep k's raw projection alive
        x_t = x.transpose(1, 2)
        q_norm = l2_normalize(_linear_cf(x_t, self.q.weight, self.q.bias).view(b, heads, d, n), dim=2)
        q_scaled = self.scaled_query_cf(q_norm, geometry)
        kv_w, kv_b = self.kv.weight, self.kv.bias
        k_local = l2_normalize(
            _linear_cf(x_t, kv_w[:c], kv_b[:c] if kv_b is not None else None).view(b, heads, d, n), dim=2
        )
        v_local = _linear_cf(x_t, kv_w[c:], kv_b[c:] if kv_b is not None else None).view(b, heads, d, n)

        # peripheral path: σ(X) = LN(AvgPool(GELU(sr(X)))); the 1×1 conv `sr` is applied as the per-token
        # linear map it is, channels-first, i.e. straight into an NCHW map for the pooling
        pooled = self.act(_linear_cf(x_t, self.sr.weight.flatten(1), self.sr.bias))
        pooled = F.adaptive_avg_pool2d(pooled.view(b, c, height, width), geometry.pool_size)
        pooled = self.norm(pooled.flatten(2).transpose(1, 2))
        kv_pool = self.kv(pooled).view(b, -1, 2, heads, d).permute(2, 0, 3, 1, 4)  # same kv projection
        k_pool, v_pool = l2_normalize(kv_pool[0], dim=-1), kv_pool[1]  # (B, heads, P, d)
        attn_pool = q_scaled.transpose(-2, -1) @ k_pool.transpose(-2, -1)  # (B, heads, N, P)
        attn_pool = attn_pool + self.position_bias(geometry, geometry.pool_size)

        swa = self._use_swattention(x)
        if not swa and self._fused_window_applies(q_scaled, k_local, v_local, attn_pool, v_pool):
            bias_local = self.relative_pos_bias_local.unsqueeze(-1) + geometry.local_mask.t().to(q_scaled.dtype)
            pos = None
            if self.learnable_tokens is not None:
                pos = self.learnable_tokens.transpose(-2, -1) @ q_norm + self.learnable_bias.transpose(-2, -1)
            kernel = _cpu_kernel_applies(q_scaled) and cpu_window_kernels() is not None
            branch = _WindowAttentionCPU if kernel else _WindowAttention
            x = branch.apply(q_scaled, k_local, v_local, bias_local, attn_pool, v_pool, pos, height, width, window)
            x = x.reshape(b, c, n)
            x = torch.baddbmm(self.proj.bias, x.transpose(1, 2), self.proj.weight.t().expand(b, c, c))
            return self.proj_drop(x)

        # the reference path (custom ops; meta tensors and FLOP counting, torch.compile, swattention, dropout on
        # the attention weights): the query-centred window, scores (B, heads, N, k²) for the softmax (token-major:
        # the softmax over the last axis is ~3x faster on CPU than over an outer one)
        if swa:
            try:  # the kernel adds the static bias and writes -inf outside the map
                attn_local = _SwQkRpb.apply(
                    q_scaled.transpose(-2, -1).contiguous(),
                    k_local.transpose(-2, -1).contiguous(),
                    self.relative_pos_bias_local,
                    height,
                    width,
                    window,
                )
            except TypeError as e:  # a build whose functions take other arguments
                _disable_swattention(e)
                swa = False
        # compiled: the window products as plain ops that inductor fuses (the custom ops are opaque to it)
        compiled = torch.compiler.is_compiling()
        qk = window_qk_decomposed if compiled else window_qk
        av = window_av_decomposed if compiled else window_av
        if not swa:
            attn_local = qk(q_scaled, k_local, height, width, window)  # (B, heads, k², N)
            attn_local = (
                attn_local + (self.relative_pos_bias_local.unsqueeze(-1) + geometry.local_mask.t().to(attn_local.dtype))
            ).transpose(-2, -1)

        # one softmax over both paths: their weights compete for the same unit mass
        attn = torch.cat([attn_local, attn_pool], dim=-1).softmax(dim=-1)
        attn = self.attn_drop(attn)
        attn_local, attn_pool = torch.split(attn, [self.local_len, attn_pool.shape[-1]], dim=-1)
        attn_local = attn_local.transpose(-2, -1)  # (B, heads, k², N) view
        if self.learnable_tokens is not None:
            # positional attention: a query-dependent dynamic bias, added after the softmax (q̂ without QE)
            attn_local = (
                self.learnable_tokens.transpose(-2, -1) @ q_norm + self.learnable_bias.transpose(-2, -1)
            ) + attn_local
        if swa:
            x_local = _SwAv.apply(
                attn_local.transpose(-2, -1).type_as(v_local).contiguous(),
                v_local.transpose(-2, -1).contiguous(),
                height,
                width,
                window,
            ).transpose(-2, -1)
        else:
            x_local = av(attn_local, v_local, height, width, window)  # (B, heads, d, N)
        x = (x_local + v_pool.transpose(-2, -1) @ attn_pool.transpose(-2, -1)).reshape(b, c, n)
        # back to token-major for the residual stream: one GEMM on the transposed view
        x = torch.baddbmm(self.proj.bias, x.transpose(1, 2), self.proj.weight.t().expand(b, c, c))
        return self.proj_drop(x)


class Block(nn.Module):
    """Pre-norm block: ``x + DropPath(attn(LN(x)))``, ``x + DropPath(ConvGLU(LN(x)))`` (or the ``ffn`` mixer)."""

    def __init__(
        self,
        dim: int,
        num_heads: int,
        window_size: int = 3,
        mlp_ratio: float = 4.0,
        qkv_bias: bool = True,
        drop: float = 0.0,
        attn_drop: float = 0.0,
        drop_path: float = 0.0,
        act_layer=nn.GELU,
        norm_layer=nn.LayerNorm,
        sr_ratio: int = 1,
        query_embedding: bool = True,
        positional_attention: bool = True,
        attention_backend: str = "auto",
        ffn: str = "convglu",
        device=None,
        dtype=None,
    ):
        super().__init__()
        dd = {"device": device, "dtype": dtype}
        self.norm1 = norm_layer(dim, **dd)
        if sr_ratio == 1:
            self.attn = Attention(dim, num_heads, qkv_bias, attn_drop, drop, query_embedding, **dd)
        else:
            self.attn = AggregatedAttention(
                dim,
                num_heads,
                window_size,
                qkv_bias,
                attn_drop,
                drop,
                query_embedding,
                positional_attention,
                attention_backend,
                **dd,
            )
        self.drop_path = DropPath(drop_path) if drop_path > 0.0 else nn.Identity()
        self.norm2 = norm_layer(dim, **dd)
        self.mlp = _ffn_layer(ffn)(dim, int(dim * mlp_ratio), act_layer=act_layer, drop=drop, **dd)

    def forward(self, x: Tensor, height: int, width: int, geometry: StageGeometry) -> Tensor:
        x = x + self.drop_path(self.attn(self.norm1(x), height, width, geometry))
        return x + self.drop_path(self.mlp(self.norm2(x), height, width))


class OverlapPatchEmbed(nn.Module):
    """Overlapping patch embedding (PVTv2): conv with kernel > stride, then LayerNorm (eps 1e-5)."""

    def __init__(
        self, patch_size: int = 7, stride: int = 4, in_chans: int = 3, embed_dim: int = 768, device=None, dtype=None
    ):
        super().__init__()
        patch_size = to_2tuple(patch_size)
        self.proj = nn.Conv2d(
            in_chans,
            embed_dim,
            kernel_size=patch_size,
            stride=stride,
            padding=(patch_size[0] // 2, patch_size[1] // 2),
            device=device,
            dtype=dtype,
        )
        self.norm = nn.LayerNorm(embed_dim, device=device, dtype=dtype)

    def forward(self, x: Tensor) -> Tuple[Tensor, int, int]:
        x = self.proj(x)
        _, _, h, w = x.shape
        return self.norm(x.flatten(2).transpose(1, 2)), h, w


# ----------------------------------------------------------------------------------------------------
# The model
# ----------------------------------------------------------------------------------------------------


@register_notrace_module  # reason: builds/looks up size-dependent tensors with Python control flow on sizes
class StageGeometries(nn.Module):
    """The size-dependent tensors of every stage (:class:`StageGeometry`), derived from each input's actual
    stage sizes and kept in a small LRU cache per (stage, size, device). No parameters or buffers: nothing
    here is in the state dict. The arguments are the model's (see :class:`TransNeXt`), fixed at construction.
    """

    cache_size = 32

    def __init__(
        self,
        img_size: Tuple[int, int],
        pretrain_size: Tuple[int, int],
        patch_size: int,
        sr_ratios: Tuple[int, ...],
        window_sizes: Tuple[int, ...],
        fixed_pool_size: Optional[Tuple[int, int]],
        length_scaling: bool,
        position_bias: str,
    ):
        super().__init__()
        self.img_size, self.pretrain_size, self.patch_size = img_size, pretrain_size, patch_size
        self.sr_ratios, self.window_sizes, self.fixed_pool_size = sr_ratios, window_sizes, fixed_pool_size
        self.length_scaling, self.position_bias = length_scaling, position_bias
        self._cache: "OrderedDict[tuple, StageGeometry]" = OrderedDict()

    # a cached lookup (Python control flow on sizes, .item() on a cache miss) that torch.compile runs eagerly:
    # one graph break per forward, before the stages, so that the stages compile as one graph of static shapes
    @torch.compiler.disable
    def forward(self, image: Tensor, num_stages: int) -> List[StageGeometry]:
        """The geometries of the first ``num_stages`` stages for an input ``image`` (B, C, H, W), on its device."""
        size = (image.shape[-2], image.shape[-1])
        return [self.get(i, stage_size(size, i, self.patch_size), image.device) for i in range(num_stages)]

    def get(self, stage: int, size: Tuple[int, int], device: torch.device) -> StageGeometry:
        """The cached geometry of ``stage`` (0-based) for a ``size`` = (H, W) token grid on ``device``.

        Computed on the CPU from the sizes alone (so it also serves meta-device audits) and moved to
        ``device`` once; an LRU of recent (stage, size, device) keys is kept.
        """
        key = (stage, tuple(size), str(device))
        geometry = self._cache.get(key)
        if geometry is None:
            # never inference tensors, though the first forward may run under torch.inference_mode: a cached
            # geometry is reused by later training steps, whose indexing saves it for backward
            with torch.inference_mode(False):
                geometry = self._build(stage, tuple(size), torch.device(device))
            self._cache[key] = geometry
            if len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        return geometry

    def pool_size(self, stage: int, size: Tuple[int, int]) -> Tuple[int, int]:
        sr = self.sr_ratios[stage]
        if sr == 1:
            return size  # full attention: keys are the tokens themselves
        if self.fixed_pool_size is not None:
            return self.fixed_pool_size
        return max(1, size[0] // sr), max(1, size[1] // sr)

    def _build(self, stage: int, size: Tuple[int, int], device: torch.device) -> StageGeometry:
        pool = self.pool_size(stage, size)
        ref_size = stage_size(self.img_size, stage, self.patch_size)
        ref_pool = self.pool_size(stage, ref_size)
        pretrain = stage_size(self.pretrain_size, stage, self.patch_size)
        counted_keys = pool if self.length_scaling else ref_pool
        if self.sr_ratios[stage] == 1:
            local_mask = None
            seq_len = torch.full((size[0] * size[1], 1), float(counted_keys[0] * counted_keys[1]), dtype=torch.float64)
        else:
            valid = window_validity(size, self.window_sizes[stage])
            local_mask = torch.zeros(valid.shape, dtype=torch.float32).masked_fill(~valid, float("-inf"))
            seq_len = (valid.sum(-1, keepdim=True) + counted_keys[0] * counted_keys[1]).double()
        if self.position_bias == "interpolate":
            bias_query, bias_key = ref_size, ref_pool
        else:
            bias_query, bias_key = size, pool
        index_h, index_w, table = relative_position_cpb(bias_query, bias_key, pretrain)
        # float64 where the device has it: each forward casts to its own dtype, so float64 models see exact values
        real = torch.float32 if device.type == "mps" else torch.float64
        return StageGeometry(
            size=size,
            pool_size=pool,
            seq_length_scale=seq_len.log().to(device, real),
            local_mask=local_mask.to(device) if local_mask is not None else None,
            bias_index_h=index_h.to(device),
            bias_index_w=index_w.to(device),
            bias_table=table.to(device, real),
            bias_table_shape=(int(index_h.max()) + 1, int(index_w.max()) + 1),
            bias_query=bias_query,
            bias_key=bias_key,
        )


def _per_stage(value, num_stages: int, name: str) -> tuple:
    if isinstance(value, (list, tuple)):
        if len(value) != num_stages:
            raise ValueError(
                f"{name} has {len(value)} entries but the model has {num_stages} stages; give one per stage"
            )
        return tuple(value)
    return (value,) * num_stages


class TransNeXt(nn.Module):
    """TransNeXt backbone/classifier, official parameter names, any input size.

    Args:
        img_size: reference input size. Only used as the size at which the position bias is generated in
            ``position_bias="interpolate"`` mode and, with ``length_scaling=False``, as the size whose key
            counts are frozen; the model runs at any size in every mode. Int or (H, W).
        pretrain_size: size the weights were trained at (default: ``img_size``). log-CPB coordinates are
            normalised by the stage grids at this size; keep 224 when fine-tuning or running a 224 model
            at other sizes (the official 384 fine-tunes and all downstream models do).
        pool_mode: ``"normal"``: pooled map = stage size // sr_ratio (1/32 of the input, quadratic cost);
            ``"linear"``: pooled map fixed at ``fixed_pool_size`` (default: pretrain size // 32, i.e. 7×7),
            cost linear in the input area. Default: ``"linear"`` if ``fixed_pool_size`` is given, else normal.
        fixed_pool_size: official name for the linear mode's pool size (int or (H, W)).
        position_bias: ``"extrapolate"`` (default; log-CPB on each input's own coordinates) or
            ``"interpolate"`` (bias generated at ``img_size``, resized bilinearly to the actual query and key
            grids; the official downstream ``is_extrapolation=False``). ``is_extrapolation`` is accepted as
            the official alias.
        length_scaling: True (paper): the attention scale uses each query's actual key count. False: the
            key counts at ``img_size`` are kept (window positions still counted per query) — the paper's
            "No Length-scaling" multi-scale ablation (Table 5; the paper gives no procedure, docs/transnext.md).
        window_size: window side per stage (odd); ignored by full-attention stages.
        sr_ratios: per stage; 1 selects full attention (M), > 1 aggregated attention (A) with that pooling.
        query_embedding / positional_attention: False removes QE / the learnable tokens and bias (the
            roadmap steps 6–7 of Table 2; checkpoints of the released models need both True).
        attention_backend: ``"auto"`` (swattention kernels for CUDA tensors when importable, else native),
            ``"native"`` or ``"swattention"`` (error if unavailable).
        ffn: the blocks' channel mixer. ``"convglu"`` (default, the paper's and the checkpoints'),
            ``"glu"`` (the same GLU without the depthwise conv: Table 2 step 4, whose step 5 adds the conv) or
            ``"mlp"`` (fc1-GELU-fc2 at the full width C·mlp_ratio, which the GLUs' 2/3 width matches in
            parameters, Sec. 3.2). Keys of ``"glu"``/``"mlp"`` are ``mlp.fc1``/``mlp.fc2`` only.
        Other arguments follow the official constructor (embed_dims, num_heads, mlp_ratios, depths,
        drop_path_rate with a linear schedule over all blocks, ...).
    """

    def __init__(
        self,
        img_size: Union[int, Tuple[int, int]] = 224,
        pretrain_size: Optional[Union[int, Tuple[int, int]]] = None,
        window_size: Union[int, Sequence[Optional[int]]] = (3, 3, 3, None),
        patch_size: int = 4,
        in_chans: int = 3,
        num_classes: int = 1000,
        embed_dims: Sequence[int] = (64, 128, 256, 512),
        num_heads: Sequence[int] = (1, 2, 4, 8),
        mlp_ratios: Sequence[float] = (4, 4, 4, 4),
        qkv_bias: bool = True,
        drop_rate: float = 0.0,
        attn_drop_rate: float = 0.0,
        drop_path_rate: float = 0.0,
        norm_layer=partial(nn.LayerNorm, eps=1e-6),
        depths: Sequence[int] = (3, 4, 6, 3),
        sr_ratios: Sequence[int] = (8, 4, 2, 1),
        num_stages: int = 4,
        fixed_pool_size: Optional[Union[int, Tuple[int, int]]] = None,
        pool_mode: Optional[str] = None,
        position_bias: str = "extrapolate",
        is_extrapolation: Optional[bool] = None,
        length_scaling: bool = True,
        query_embedding: bool = True,
        positional_attention: bool = True,
        attention_backend: str = "auto",
        ffn: str = "convglu",
        global_pool: str = "avg",
        device=None,
        dtype=None,
    ):
        super().__init__()
        dd = {"device": device, "dtype": dtype}
        if pool_mode is None:
            pool_mode = "normal" if fixed_pool_size is None else "linear"
        if pool_mode not in ("normal", "linear"):
            raise ValueError(f"pool_mode must be 'normal' or 'linear', not {pool_mode!r}")
        if pool_mode == "normal" and fixed_pool_size is not None:
            raise ValueError(
                "fixed_pool_size is the linear mode's pool size; use pool_mode='linear' (or leave it unset)"
            )
        if is_extrapolation is not None:
            position_bias = "extrapolate" if is_extrapolation else "interpolate"
        if position_bias not in ("extrapolate", "interpolate"):
            raise ValueError(f"position_bias must be 'extrapolate' or 'interpolate', not {position_bias!r}")
        if attention_backend not in ("auto", "native", "swattention"):
            raise ValueError(f"attention_backend must be 'auto', 'native' or 'swattention', not {attention_backend!r}")
        if global_pool not in ("avg", ""):
            raise ValueError(f"global_pool must be 'avg' or '' (no pooling), not {global_pool!r}")
        _ffn_layer(ffn)  # validated before anything is built
        self.num_classes = num_classes
        self.in_chans = in_chans
        self.num_stages = num_stages
        self.depths = _per_stage(depths, num_stages, "depths")
        self.embed_dims = _per_stage(embed_dims, num_stages, "embed_dims")
        num_heads = _per_stage(num_heads, num_stages, "num_heads")
        mlp_ratios = _per_stage(mlp_ratios, num_stages, "mlp_ratios")
        self.sr_ratios = _per_stage(sr_ratios, num_stages, "sr_ratios")
        window_size = _per_stage(window_size, num_stages, "window_size")
        self.window_sizes = tuple(w if w is not None else 3 for w in window_size)
        self.mixers = "".join("M" if sr == 1 else "A" for sr in self.sr_ratios)
        self.img_size = to_2tuple(img_size)
        self.pretrain_size = to_2tuple(pretrain_size) if pretrain_size is not None else self.img_size
        self.patch_size = patch_size
        self.pool_mode = pool_mode
        if pool_mode == "linear":
            self.fixed_pool_size = (
                to_2tuple(fixed_pool_size)
                if fixed_pool_size is not None
                else tuple(max(1, s // (patch_size * 8)) for s in self.pretrain_size)
            )
        else:
            self.fixed_pool_size = None
        self.position_bias = position_bias
        self.length_scaling = length_scaling
        self.ffn = ffn
        self.global_pool = global_pool
        self.num_features = self.head_hidden_size = self.embed_dims[-1]
        self.geometries = StageGeometries(
            self.img_size,
            self.pretrain_size,
            patch_size,
            self.sr_ratios,
            self.window_sizes,
            self.fixed_pool_size,
            length_scaling,
            position_bias,
        )
        self.feature_info = []

        dpr = torch.linspace(0, drop_path_rate, sum(self.depths), device="cpu").tolist()
        cur = 0
        for i in range(num_stages):
            patch_embed = OverlapPatchEmbed(
                patch_size=patch_size * 2 - 1 if i == 0 else 3,
                stride=patch_size if i == 0 else 2,
                in_chans=in_chans if i == 0 else self.embed_dims[i - 1],
                embed_dim=self.embed_dims[i],
                **dd,
            )
            block = nn.ModuleList(
                [
                    Block(
                        dim=self.embed_dims[i],
                        num_heads=num_heads[i],
                        window_size=self.window_sizes[i],
                        mlp_ratio=mlp_ratios[i],
                        qkv_bias=qkv_bias,
                        drop=drop_rate,
                        attn_drop=attn_drop_rate,
                        drop_path=dpr[cur + j],
                        norm_layer=norm_layer,
                        sr_ratio=self.sr_ratios[i],
                        query_embedding=query_embedding,
                        positional_attention=positional_attention,
                        attention_backend=attention_backend,
                        ffn=ffn,
                        **dd,
                    )
                    for j in range(self.depths[i])
                ]
            )
            cur += self.depths[i]
            setattr(self, f"patch_embed{i + 1}", patch_embed)
            setattr(self, f"block{i + 1}", block)
            setattr(self, f"norm{i + 1}", norm_layer(self.embed_dims[i], **dd))
            self.feature_info.append(
                dict(num_chs=self.embed_dims[i], reduction=patch_size * 2**i, module=f"norm{i + 1}")
            )
        self.head = nn.Linear(self.num_features, num_classes, **dd) if num_classes > 0 else nn.Identity()

        self.apply(self._init_weights)  # temperature, QE, tokens and biases keep their own initialisations

    @staticmethod
    def _init_weights(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            trunc_normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Conv2d):
            fan_out = m.kernel_size[0] * m.kernel_size[1] * m.out_channels // m.groups
            m.weight.data.normal_(0, math.sqrt(2.0 / fan_out))
            if m.bias is not None:
                m.bias.data.zero_()
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)

    # ---- optimiser / timm API -------------------------------------------------------------------------

    @torch.jit.ignore
    def no_weight_decay_keywords(self) -> set:
        """The official keywords: parameters whose names contain one of these get no weight decay."""
        return set(NO_WEIGHT_DECAY_KEYWORDS)

    @torch.jit.ignore
    def no_weight_decay(self) -> set:
        """Full names of the parameters matching the official keywords (timm's optimizer factory expects
        names; it exempts 1-D parameters and biases by itself)."""
        return {name for name, _ in self.named_parameters() if any(k in name for k in NO_WEIGHT_DECAY_KEYWORDS)}

    @torch.jit.ignore
    def group_matcher(self, coarse: bool = False) -> dict:
        if coarse:
            return dict(stem=r"^patch_embed1", blocks=r"^(?:patch_embed|block|norm)(\d+)")
        return dict(
            stem=r"^patch_embed1",
            blocks=[(r"^block(\d+)\.(\d+)", None), (r"^patch_embed(\d+)", (0,)), (r"^norm(\d+)", (99999,))],
        )

    @torch.jit.ignore
    def get_classifier(self) -> nn.Module:
        return self.head

    def reset_classifier(self, num_classes: int, global_pool: Optional[str] = None) -> None:
        dd = get_device_dtype(self)
        if global_pool is not None:
            if global_pool not in ("avg", ""):
                raise ValueError(f"global_pool must be 'avg' or '' (no pooling), not {global_pool!r}")
            self.global_pool = global_pool
        self.num_classes = num_classes
        self.head = nn.Linear(self.num_features, num_classes, **dd) if num_classes > 0 else nn.Identity()
        self.head.train(self.training)

    def geometry(self, stage: int, size: Tuple[int, int], device: torch.device) -> StageGeometry:
        """The cached size-dependent tensors of ``stage`` (0-based) for an H×W token grid on ``device``."""
        return self.geometries.get(stage, size, device)

    # ---- forward --------------------------------------------------------------------------------------

    def _forward_stages(self, x: Tensor, take_indices: Sequence[int] = (), last: Optional[int] = None):
        """Run stages 0..``last`` (all by default); returns the last stage map and the maps of ``take_indices``."""
        b = x.shape[0]
        outs: List[Tensor] = []
        last = self.num_stages - 1 if last is None else last
        geometries = self.geometries(x, last + 1)  # stage sizes follow from the input's (stage_size)
        for i in range(last + 1):
            x, h, w = getattr(self, f"patch_embed{i + 1}")(x)
            geometry = geometries[i]
            blocks = getattr(self, f"block{i + 1}")
            parts = (x,)
            # inference on the CPU: a few images at a time through the stage (CPU_CHUNK_BYTES); not in train mode,
            # where DropPath would draw its masks per chunk (and FX traces a Proxy, not a Tensor)
            if not (self.training or torch.is_grad_enabled()) and len(blocks) and isinstance(x, Tensor):
                parts = _chunks(x, images_per_chunk(x, blocks[0].mlp.fc2.in_features, CPU_CHUNK_BYTES))
            x = _joined([_through(blocks, part, h, w, geometry) for part in parts])
            x = getattr(self, f"norm{i + 1}")(x)
            x = x.reshape(b, h, w, -1).permute(0, 3, 1, 2)  # NCHW view of channels-last memory
            if i in take_indices:
                outs.append(x.contiguous())
        return x, outs

    def forward_intermediates(
        self,
        x: Tensor,
        indices: Optional[Union[int, List[int]]] = None,
        norm: bool = False,
        stop_early: bool = False,
        output_fmt: str = "NCHW",
        intermediates_only: bool = False,
    ):
        """timm's feature API (``features_only=True`` uses it): the outputs of the stages ``indices`` (timm's
        semantics: None = all, int n = the last n, a list = those, negative from the end) as NCHW maps,
        strides 4/8/16/32. Every stage ends in its own LayerNorm (``norm{i}``, official), so the maps are
        always normed and ``norm`` changes nothing. Returns ``(final map, maps)``, or only the maps."""
        if output_fmt != "NCHW":
            raise ValueError(f"output_fmt must be 'NCHW', not {output_fmt!r}")
        take_indices, max_index = feature_take_indices(self.num_stages, indices)
        stop = max_index if (stop_early or intermediates_only) else None
        x, outs = self._forward_stages(x, take_indices, stop)
        return outs if intermediates_only else (x, outs)

    def prune_intermediate_layers(
        self, indices: Union[int, List[int]] = 1, prune_norm: bool = False, prune_head: bool = True
    ) -> List[int]:
        """Drop the stages after the last of ``indices`` (and the classifier); returns the absolute indices.
        The stage norms stay (each feeds the next stage and ends its stage's output), so ``prune_norm`` is moot."""
        take_indices, max_index = feature_take_indices(self.num_stages, indices)
        prune_end = max_index < self.num_stages - 1
        for i in range(max_index + 1, self.num_stages):
            for name in (f"patch_embed{i + 1}", f"block{i + 1}", f"norm{i + 1}"):
                delattr(self, name)
        self.num_stages = max_index + 1
        if prune_end:  # features now end at the last kept stage; the head was sized for the final one
            self.num_features = self.head_hidden_size = self.embed_dims[max_index]
        if prune_head or prune_end:
            self.reset_classifier(0, "")
        return take_indices

    def forward_features(self, x: Tensor) -> Tensor:
        """The normed map of the last stage, (B, C4, H/32, W/32)."""
        return self._forward_stages(x)[0]

    def forward_head(self, x: Tensor, pre_logits: bool = False) -> Tensor:
        if self.global_pool == "avg":
            x = x.mean(dim=(-2, -1))
        return x if pre_logits else self.head(x)

    def forward(self, x: Tensor) -> Tensor:
        return self.forward_head(self.forward_features(x))


# ----------------------------------------------------------------------------------------------------
# Checkpoints, configs, registration
# ----------------------------------------------------------------------------------------------------

_GEOMETRY_KEYS = ("relative_pos_index", "relative_coords_table", "seq_length_scale", "padding_mask")


def checkpoint_filter_fn(state_dict: dict, model: TransNeXt) -> dict:
    """Official checkpoint -> this model: drop geometry tensors (size-dependent, recomputed here). Names are
    unchanged. Takes an already unwrapped state dict (timm's loaders strip ``{'model': ...}`` and ``module.``)."""
    out = {}
    for k, v in state_dict.items():
        if any(g in k.rsplit(".", 1)[-1] for g in _GEOMETRY_KEYS):
            continue
        out[k] = v
    return out


def _create_transnext(variant: str, pretrained: bool = False, **kwargs) -> TransNeXt:
    out_indices = kwargs.pop("out_indices", (0, 1, 2, 3))
    return build_model_with_cfg(
        TransNeXt,
        variant,
        pretrained,
        pretrained_filter_fn=checkpoint_filter_fn,
        feature_cfg=dict(out_indices=out_indices, feature_cls="getter"),
        **kwargs,
    )


def _cfg(**kwargs) -> dict:
    return {
        "url": "",
        "num_classes": 1000,
        "input_size": (3, 224, 224),
        "pool_size": (7, 7),
        "crop_pct": 0.875,
        "interpolation": "bicubic",
        "mean": IMAGENET_DEFAULT_MEAN,
        "std": IMAGENET_DEFAULT_STD,
        "first_conv": "patch_embed1.proj",
        "classifier": "head",
        "fixed_input_size": False,
        "license": "apache-2.0",
        **kwargs,
    }


# 384² fine-tunes are evaluated by warping to 384² without a crop (App. C.2)
_CFG_384 = dict(input_size=(3, 384, 384), pool_size=(12, 12), crop_pct=1.0, crop_mode="squash")

default_cfgs = generate_default_cfgs(
    {
        "transnext_micro": _cfg(),
        "transnext_tiny": _cfg(),
        "transnext_small": _cfg(),
        "transnext_base": _cfg(),
        "transnext_micro_AAAA": _cfg(input_size=(3, 256, 256), pool_size=(8, 8)),
        "transnext_small_384": _cfg(**_CFG_384),
        "transnext_base_384": _cfg(**_CFG_384),
        "transnext_micro_aamm": _cfg(),
        "transnext_micro_ammm": _cfg(),
        "transnext_micro_mmmm": _cfg(),
    }
)

# Table 3 of the paper; all: head dim 24, mlp ratios [8, 8, 4, 4], window 3, sr [8, 4, 2, 1], patch 4
_MICRO = dict(embed_dims=(48, 96, 192, 384), num_heads=(2, 4, 8, 16), depths=(2, 2, 15, 2))
_TINY = dict(embed_dims=(72, 144, 288, 576), num_heads=(3, 6, 12, 24), depths=(2, 2, 15, 2))
_SMALL = dict(embed_dims=(72, 144, 288, 576), num_heads=(3, 6, 12, 24), depths=(5, 5, 22, 5))
_BASE = dict(embed_dims=(96, 192, 384, 768), num_heads=(4, 8, 16, 32), depths=(5, 5, 23, 5))
_COMMON = dict(patch_size=4, mlp_ratios=(8, 8, 4, 4), window_size=(3, 3, 3, None), sr_ratios=(8, 4, 2, 1))


def _build(variant: str, pretrained: bool, arch: dict, **kwargs) -> TransNeXt:
    return _create_transnext(variant, pretrained, **{**_COMMON, **arch, **kwargs})


@register_model
def transnext_micro(pretrained: bool = False, **kwargs) -> TransNeXt:
    """TransNeXt-Micro: 12.8 M params, 2.7 GFLOPs at 224² (drop path 0.15 in the paper's recipe)."""
    return _build("transnext_micro", pretrained, _MICRO, **kwargs)


@register_model
def transnext_tiny(pretrained: bool = False, **kwargs) -> TransNeXt:
    """TransNeXt-Tiny: 28.2 M params, 5.7 GFLOPs at 224² (drop path 0.25)."""
    return _build("transnext_tiny", pretrained, _TINY, **kwargs)


@register_model
def transnext_small(pretrained: bool = False, **kwargs) -> TransNeXt:
    """TransNeXt-Small: 49.7 M params, 10.3 GFLOPs at 224² (drop path 0.45)."""
    return _build("transnext_small", pretrained, _SMALL, **kwargs)


@register_model
def transnext_base(pretrained: bool = False, **kwargs) -> TransNeXt:
    """TransNeXt-Base: 89.7 M params, 18.4 GFLOPs at 224² (drop path 0.6)."""
    return _build("transnext_base", pretrained, _BASE, **kwargs)


@register_model
def transnext_micro_AAAA(pretrained: bool = False, **kwargs) -> TransNeXt:
    """Micro with aggregated attention in all four stages (Table 9): 256² input, pool 1/64 (4×4), 13.1 M."""
    kwargs = {"img_size": 256, "sr_ratios": (16, 8, 4, 2), "window_size": (3, 3, 3, 3), **kwargs}
    return _build("transnext_micro_AAAA", pretrained, _MICRO, **kwargs)


@register_model
def transnext_small_384(pretrained: bool = False, **kwargs) -> TransNeXt:
    """TransNeXt-Small fine-tuned at 384² from 224² weights (pool 12×12, log-CPB normalised by the 224 grid)."""
    kwargs = {"img_size": 384, "pretrain_size": 224, **kwargs}
    return _build("transnext_small_384", pretrained, _SMALL, **kwargs)


@register_model
def transnext_base_384(pretrained: bool = False, **kwargs) -> TransNeXt:
    """TransNeXt-Base fine-tuned at 384² from 224² weights."""
    kwargs = {"img_size": 384, "pretrain_size": 224, **kwargs}
    return _build("transnext_base_384", pretrained, _BASE, **kwargs)


@register_model
def transnext_micro_aamm(pretrained: bool = False, **kwargs) -> TransNeXt:
    """Table 9 ablation: Micro with full attention (M) in stages 3–4."""
    return _build("transnext_micro_aamm", pretrained, _MICRO, **{"sr_ratios": (8, 4, 1, 1), **kwargs})


@register_model
def transnext_micro_ammm(pretrained: bool = False, **kwargs) -> TransNeXt:
    """Table 9 ablation: Micro with full attention (M) in stages 2–4."""
    return _build("transnext_micro_ammm", pretrained, _MICRO, **{"sr_ratios": (8, 1, 1, 1), **kwargs})


@register_model
def transnext_micro_mmmm(pretrained: bool = False, **kwargs) -> TransNeXt:
    """Table 9 ablation: Micro with full attention (M) in every stage (out of memory in the paper's training)."""
    return _build("transnext_micro_mmmm", pretrained, _MICRO, **{"sr_ratios": (1, 1, 1, 1), **kwargs})
