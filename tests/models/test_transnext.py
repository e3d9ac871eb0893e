"""TransNeXt (models/transnext.py) against the paper, docs/transnext.md and a slow
per-query reference (tests/transnext_reference.py)."""

from __future__ import annotations

import math
from functools import partial
import sys
from pathlib import Path

import pytest
import timm
import torch
import torch.nn.functional as F
from timm.optim import create_optimizer_v2

import models  # noqa: F401  (registers the models)
from results.audit import MEASURES, Audit
from harness.engine.models import build_model
from harness.measure.flops import count_flops, count_params
from models import transnext
from models.transnext import TransNeXt
from results import paper_tables

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import transnext_reference as reference  # noqa: E402

VARIANTS = ["transnext_micro", "transnext_tiny", "transnext_small", "transnext_base", "transnext_micro_AAAA"]
CPU = torch.device("cpu")


def small_model(**kwargs) -> TransNeXt:
    """A 1-block-per-stage TransNeXt with head dim 24, for fast numerical tests."""
    cfg = dict(
        embed_dims=(48, 48, 48, 48),
        num_heads=(2, 2, 2, 2),
        depths=(1, 1, 1, 1),
        mlp_ratios=(2, 2, 2, 2),
        num_classes=10,
    )
    return TransNeXt(**{**cfg, **kwargs})


SPECIAL_PARAMETERS = ("query_embedding", "learnable", "relative_pos_bias_local", "temperature", "cpb")


def randomize_special_parameters(model, std=0.5):
    """Zero/tiny-initialised parameters get values large enough for every term to matter."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if any(k in name for k in SPECIAL_PARAMETERS):
                p.normal_(0, std)


# ---------------------------------------------------------------------------------------------------------
# numerics: the vectorised mixers equal the per-query reference
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "size, pool, kwargs",
    [
        ((7, 9), (3, 4), {}),  # stage sr 2 -> pool size // 2, non-square, odd
        ((6, 5), (3, 2), {"window_size": (5, 5, 5, None)}),  # larger window
        ((5, 7), (2, 3), {"pool_mode": "linear", "fixed_pool_size": (2, 3)}),  # linear mode, non-square pool
        ((4, 4), (2, 2), {"query_embedding": False, "positional_attention": False}),
    ],
)
def test_aggregated_attention_matches_per_query_reference(size, pool, kwargs):
    torch.manual_seed(0)
    model = small_model(sr_ratios=(8, 4, 2, 1), **kwargs).double()
    randomize_special_parameters(model)
    attn = model.block3[0].attn  # stage 3: sr 2
    h, w = size
    x = torch.randn(2, h * w, 48, dtype=torch.float64)
    geometry = model.geometry(2, size, CPU)
    assert geometry.pool_size == pool
    ours = attn(x, h, w, geometry)
    ref = reference.aggregated_attention(attn, x, h, w, pool, pretrain_grid=(14, 14))  # 224/16
    assert (ours - ref).abs().max().item() <= 1e-5


def test_interpolated_position_bias_matches_reference():
    """position_bias="interpolate": log-CPB generated on the img_size grids, resized to the actual ones."""
    torch.manual_seed(0)
    model = small_model(img_size=(96, 64), pretrain_size=224, position_bias="interpolate").double()
    randomize_special_parameters(model)
    geometry = model.geometry(0, (20, 28), CPU)  # stage 1 (sr 8): pool (2, 3); reference grid (24, 16), pool (3, 2)
    ours = model.block1[0].attn.position_bias(geometry, geometry.pool_size)
    ref = reference.interpolated_pool_bias(
        model.block1[0].attn, (24, 16), (3, 2), pretrain_grid=(56, 56), query_size=(20, 28), key_size=(2, 3)
    )
    assert ours.shape == (2, 20 * 28, 6)
    assert (ours - ref).abs().max().item() <= 1e-10


def test_full_attention_matches_per_query_reference():
    torch.manual_seed(1)
    model = small_model().double()
    randomize_special_parameters(model)
    attn = model.block4[0].attn
    x = torch.randn(2, 3 * 4, 48, dtype=torch.float64)
    ours = attn(x, 3, 4, model.geometry(3, (3, 4), CPU))
    ref = reference.full_attention(attn, x, 3, 4, pretrain_grid=(7, 7))
    assert (ours - ref).abs().max().item() <= 1e-5


def test_window_ops_match_unfold_and_have_correct_gradients():
    """The three window ops against nn.Unfold (the official native code's windows), including a non-contiguous
    (token-major) weights view as the model passes it; and their autograd formulas."""
    torch.manual_seed(0)
    b, h, w, heads, d, k = 2, 4, 3, 2, 2, 3
    q = torch.randn(b, heads, d, h * w, dtype=torch.float64, requires_grad=True)
    v = torch.randn(b, heads, d, h * w, dtype=torch.float64, requires_grad=True)
    a = torch.randn(b, heads, h * w, k * k, dtype=torch.float64).transpose(-2, -1).requires_grad_()
    windows = F.unfold(v.detach().reshape(b * heads, d, h, w), k, padding=k // 2).view(b, heads, d, k * k, h * w)
    assert torch.allclose(
        transnext.window_qk(q, v, h, w, k), torch.einsum("bhdn,bhdon->bhon", q.detach(), windows), rtol=0, atol=1e-12
    )
    assert torch.allclose(
        transnext.window_av(a, v, h, w, k), torch.einsum("bhon,bhdon->bhdn", a.detach(), windows), rtol=0, atol=1e-12
    )
    # scatter is av's adjoint in the values: <av(a, v), x> = <v, scatter(a, x)>
    x = torch.randn_like(v)
    assert torch.allclose(
        (transnext.window_av(a, v, h, w, k) * x).sum(),
        (v * transnext.window_scatter(a, x, h, w, k)).sum(),
        rtol=0,
        atol=1e-12,
    )
    for op, first in zip((transnext.window_qk, transnext.window_av, transnext.window_scatter), (q, a, a)):
        assert torch.autograd.gradcheck(lambda x, y: op(x, y, h, w, k), (first, v))


def test_decomposed_window_ops_for_compile_match_the_custom_ops():
    """The plain-op window products used under torch.compile give the custom ops' values and gradients."""
    torch.manual_seed(0)
    b, h, w, heads, d, k = 2, 5, 4, 2, 3, 3
    q, key, v = (torch.randn(b, heads, d, h * w, dtype=torch.float64, requires_grad=True) for _ in range(3))
    a = torch.randn(b, heads, k * k, h * w, dtype=torch.float64, requires_grad=True)
    for custom, plain, inputs in (
        (transnext.window_qk, transnext.window_qk_decomposed, (q, key)),
        (transnext.window_av, transnext.window_av_decomposed, (a, v)),
    ):
        ours, theirs = plain(*inputs, h, w, k), custom(*inputs, h, w, k)
        assert torch.allclose(ours, theirs, rtol=0, atol=1e-12)
        g = torch.randn_like(ours)
        for x, y in zip(torch.autograd.grad((ours * g).sum(), inputs), torch.autograd.grad((theirs * g).sum(), inputs)):
            assert torch.allclose(x, y, rtol=0, atol=1e-12)


def _window_branch_reference(q, k, v, bias, logits_pool, v_pool, pos, h, w, window):
    """The reference path's window branch (AggregatedAttention.forward with the custom ops), as a function."""
    taps = window * window
    attn = torch.cat([(transnext.window_qk(q, k, h, w, window) + bias).transpose(-2, -1), logits_pool], -1)
    attn_local, attn_pool = attn.softmax(-1).split([taps, logits_pool.shape[-1]], -1)
    local = attn_local.transpose(-2, -1) + pos if pos is not None else attn_local.transpose(-2, -1)
    return transnext.window_av(local, v, h, w, window) + v_pool.transpose(-2, -1) @ attn_pool.transpose(-2, -1)


@pytest.mark.parametrize(
    "b, heads, d, h, w, window, pool, positional",
    [
        (2, 2, 3, 4, 5, 3, 4, True),  # non-square
        (1, 2, 2, 5, 3, 5, 3, True),  # a 5x5 window wider than the map
        (2, 1, 2, 1, 3, 3, 2, False),  # one row, no positional attention
    ],
)
@pytest.mark.parametrize("branch", ["_WindowAttention", "_WindowAttentionCPU"])
def test_fused_window_attention_gradchecks_and_equals_the_reference_path(
    branch, b, heads, d, h, w, window, pool, positional
):
    """Both fused window branches -- _WindowAttention (flat padded grid, hand-written backward) and
    _WindowAttentionCPU (the compiled CPU kernels) -- against torch.autograd.gradcheck in float64, and their values
    and gradients against the custom-op composition they replace, with -inf outside the map."""
    function = getattr(transnext, branch)
    torch.manual_seed(0)
    n, taps = h * w, window * window
    f64 = {"dtype": torch.float64}
    mask = torch.zeros(n, taps, **f64).masked_fill(~transnext.window_validity((h, w), window), float("-inf"))
    inputs = (
        *(torch.randn(b, heads, d, n, **f64) for _ in range(3)),
        torch.randn(heads, taps, 1, **f64) + mask.t(),
        torch.randn(b, heads, n, pool, **f64),
        torch.randn(b, heads, pool, d, **f64),
        torch.randn(b, heads, taps, n, **f64) if positional else None,
    )
    inputs = tuple(t.requires_grad_() if t is not None else None for t in inputs)
    fused = function.apply(*inputs, h, w, window)
    reference_out = _window_branch_reference(*inputs, h, w, window)
    assert torch.allclose(fused, reference_out, rtol=0, atol=1e-12)
    grad = torch.randn_like(fused)
    wanted = [t for t in inputs if t is not None]
    for ours, theirs in zip(
        torch.autograd.grad((fused * grad).sum(), wanted), torch.autograd.grad((reference_out * grad).sum(), wanted)
    ):
        assert torch.allclose(ours, theirs, rtol=0, atol=1e-12)
    assert torch.autograd.gradcheck(lambda *t: function.apply(*t, h, w, window), inputs)


@pytest.mark.parametrize("cpu_kernel", [True, False])
def test_model_with_fused_window_attention_equals_the_reference_path(monkeypatch, cpu_kernel):
    """The whole model, training forward and every parameter's gradient, with the fused window branch (the CPU
    kernels, or the PyTorch ops with transnext.CPU_WINDOW_KERNEL = False) and with the custom ops
    (AggregatedAttention.fused_window = False): equal in float64; and FLOP counting (a dispatch mode) and the meta
    device take the reference path, so the window products stay counted."""
    monkeypatch.setattr(transnext, "CPU_WINDOW_KERNEL", cpu_kernel)
    taken = fused_branches_taken(monkeypatch)
    torch.manual_seed(0)
    model = small_model().double().train()
    randomize_special_parameters(model)
    x = torch.randn(2, 3, 64, 48, dtype=torch.float64)
    runs = []
    for fused in (True, False):
        monkeypatch.setattr(transnext.AggregatedAttention, "fused_window", fused)
        model.zero_grad()
        out = model(x)
        out.square().sum().backward()
        runs.append((out.detach(), {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}))
    (out_fused, grads_fused), (out_ref, grads_ref) = runs
    assert set(taken) == {"_WindowAttentionCPU" if cpu_kernel else "_WindowAttention"}
    assert torch.allclose(out_fused, out_ref, rtol=0, atol=1e-10)
    assert grads_fused.keys() == grads_ref.keys() and any("learnable_tokens" in k for k in grads_fused)
    for k in grads_fused:
        assert torch.allclose(grads_fused[k], grads_ref[k], rtol=1e-9, atol=1e-10), k
    taken.clear()
    monkeypatch.setattr(transnext.AggregatedAttention, "fused_window", True)
    counts = [count_flops(counted, (64, 48)) for counted in (small_model().to("meta"), small_model())]
    for count in counts:
        assert count.by_op.get("transnext.window_qk", 0) > 0 and count.by_op.get("transnext.window_av", 0) > 0
    assert not taken
    # on the CPU too ConvGLU's depthwise conv is counted (its kernel is not taken under a dispatch mode)
    assert counts[0].total == counts[1].total and counts[0].by_op["convolution"] == counts[1].by_op["convolution"]


def fused_branches_taken(monkeypatch) -> list:
    """The names of the fused window branches (the PyTorch ops' or the CPU kernels') as each forward takes one."""
    taken = []
    for name in ("_WindowAttention", "_WindowAttentionCPU"):
        function = getattr(transnext, name)
        monkeypatch.setattr(function, "apply", partial(_recorded, function.apply, taken, name))
    return taken


def _recorded(apply, taken: list, name: str, *args):
    taken.append(name)
    return apply(*args)


def test_the_cpu_kernels_build_and_run_by_default_on_the_cpu():
    """The compiled window and ConvGLU kernels are the CPU's path for fp32 and fp64 (a machine that cannot build
    them falls back, with a warning: the next test); bf16 tensors, other devices, mixed dtypes, strided maps and
    the tanh GELU keep the PyTorch ops."""
    assert transnext.cpu_window_kernels() is not None, "models/csrc/transnext_window.cpp did not build here"
    assert transnext._cpu_kernel_applies(torch.zeros(1)) and transnext._cpu_kernel_applies(torch.zeros(1).double())
    assert not transnext._cpu_kernel_applies(torch.zeros(1, dtype=torch.bfloat16))
    assert not transnext._cpu_kernel_applies(torch.zeros(1, device="meta"))
    maps, weight, bias = torch.zeros(2, 6, 4), torch.zeros(4, 1, 3, 3), torch.zeros(4)

    def kernels_for(gate=maps, value=maps, weight=weight, bias=bias, approximate="none"):
        return transnext._convglu_kernels(gate, value, weight, bias, approximate)

    assert transnext.cpu_convglu_kernels() is not None, "models/csrc/transnext_convglu.cpp did not build here"
    assert kernels_for() is not None and kernels_for(bias=None) is not None
    assert kernels_for(*(t.double() for t in (maps, maps, weight, bias))) is not None
    assert kernels_for(approximate="tanh") is None
    assert kernels_for(gate=maps.bfloat16(), value=maps.bfloat16()) is None
    assert kernels_for(weight=weight.bfloat16()) is None  # autocast: bf16 maps, fp32 weights (or the reverse)
    assert kernels_for(value=maps.transpose(0, 1)) is None
    assert kernels_for(gate=maps.to("meta"), value=maps.to("meta")) is None


def test_convglu_cpu_kernels_equal_the_pytorch_ops_at_any_shape_and_thread_count():
    """The kernels' forward and backward against the PyTorch ops (conv, GELU, products, conv backward) in float64,
    at channel counts that are not a multiple of the vector width, maps of one row or column or pixel, bands of
    rows (a map taller than one task's band), without a bias, and an empty batch; 1 and 2 threads give bitwise
    equal results; a tensor of the wrong shape is an error, never a read or write outside it."""
    kernels = transnext.cpu_convglu_kernels()
    torch.manual_seed(0)
    for b, h, w, c, with_bias in [
        (2, 5, 7, 19, True),
        (1, 1, 1, 3, True),
        (3, 1, 6, 16, False),
        (2, 6, 1, 33, True),
        (1, 300, 3, 300, True),
        (0, 4, 4, 8, True),
    ]:
        gate, value = (torch.randn(b, h * w, c, dtype=torch.float64, requires_grad=True) for _ in range(2))
        weight = torch.randn(c, 1, 3, 3, dtype=torch.float64, requires_grad=True)
        bias = torch.randn(c, dtype=torch.float64, requires_grad=True) if with_bias else None
        conv = transnext._dwconv_tokens(gate, weight, bias, h, w)
        hidden = F.gelu(conv) * value
        grad = torch.randn_like(hidden)
        wanted = [gate, value, weight] + ([bias] if with_bias else [])
        expected = torch.autograd.grad(hidden, wanted, grad)
        bias_or_empty = bias.detach() if with_bias else torch.empty(0, dtype=torch.float64)
        inputs = [t.detach() for t in (gate, value)]
        results = []
        threads = torch.get_num_threads()
        try:
            for count in (1, 2):
                torch.set_num_threads(count)
                forward = kernels.convglu_forward(*inputs, weight.detach(), bias_or_empty, h, w, torch.empty_like(gate))
                outputs = [torch.empty_like(gate) for _ in range(3)]  # hidden, dL/dgate, dL/dvalue
                params = kernels.convglu_backward(*inputs, grad, weight.detach(), bias_or_empty, h, w, *outputs)
                results.append([forward, *outputs, *params])
        finally:
            torch.set_num_threads(threads)
        assert all(torch.equal(one, two) for one, two in zip(*results)), (b, h, w, c)
        forward, hidden_again, grad_gate, grad_value, grad_weight, grad_bias = results[0]
        for ours, theirs in [
            (forward, hidden),
            (hidden_again, hidden),
            (grad_gate, expected[0]),
            (grad_value, expected[1]),
            (grad_weight, expected[2]),
        ] + ([(grad_bias, expected[3])] if with_bias else []):
            assert torch.allclose(ours, theirs, rtol=1e-12, atol=1e-12), (b, h, w, c)
    maps = torch.randn(2, 12, 5, dtype=torch.float64)
    weight, bias = torch.randn(5, 1, 3, 3, dtype=torch.float64), torch.randn(5, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="gate must be"):
        kernels.convglu_forward(maps, maps, weight, bias, 3, 5, torch.empty_like(maps))  # 3 x 5 is not 12 tokens
    with pytest.raises(RuntimeError, match="out must have gate's shape"):
        kernels.convglu_forward(maps, maps, weight, bias, 3, 4, maps[:1])
    with pytest.raises(RuntimeError, match="weight must be"):
        kernels.convglu_forward(maps, maps, weight[:4], bias, 3, 4, torch.empty_like(maps))
    with pytest.raises(RuntimeError, match="bias must be"):
        kernels.convglu_forward(maps, maps, weight, bias[:4], 3, 4, torch.empty_like(maps))
    with pytest.raises(RuntimeError, match="an output must have"):
        kernels.convglu_backward(maps, maps, maps, weight, bias, 3, 4, maps[:1], torch.empty(0), torch.empty(0))
    with pytest.raises(RuntimeError, match="contiguous CPU tensor"):
        kernels.convglu_forward(maps, maps.float(), weight, bias, 3, 4, torch.empty_like(maps))
    with pytest.raises(RuntimeError, match="gate must be"):  # 3 x (2^62 + 1) tokens wraps around to 12 in int64
        kernels.convglu_forward(maps, maps, weight, bias, 4, 2**62 + 3, torch.empty_like(maps))
    # an output sharing memory with an input would be read after it is written: refused (out = value is allowed)
    value = maps.clone()
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        kernels.convglu_forward(maps, value, weight, bias, 3, 4, maps)
    none, grad_gate, grad_value = torch.empty(0, dtype=torch.float64), torch.empty_like(maps), torch.empty_like(maps)
    for outputs in [(value, grad_gate, grad_value), (none, maps, grad_value), (none, grad_gate, grad_gate)]:
        with pytest.raises(RuntimeError, match="refer to a single memory location"):
            kernels.convglu_backward(maps, value, torch.randn_like(maps), weight, bias, 3, 4, *outputs)
    expected = F.gelu(transnext._dwconv_tokens(maps, weight, bias, 3, 4)) * value
    assert torch.allclose(kernels.convglu_forward(maps, value, weight, bias, 3, 4, value), expected, atol=1e-12)


@pytest.mark.parametrize("cpu_kernel", [True, False])
def test_convglu_training_is_once_differentiable_on_either_path(monkeypatch, cpu_kernel):
    """A double backward through ConvGLU's tail raises on the kernels' path and on the ops' alike (it would silently
    give no gradient for the conv on the kernels')."""
    monkeypatch.setattr(transnext, "CPU_CONVGLU_KERNEL", cpu_kernel)
    glu = transnext.ConvolutionalGLU(6, 12).double()
    x = torch.randn(2, 4 * 5, 6, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(glu(x, 4, 5).square().sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="differentiate twice"):
        grad.sum().backward()


def test_the_cpu_kernels_run_on_several_threads_under_inference_mode_and_refuse_wrong_shapes():
    """OpenMP's threads do not inherit the caller's inference mode: the kernels carry it into their parallel region
    (the softmax writes into an inference tensor), with the results of one thread; and a tensor of the wrong shape
    is an error, never a read or write outside it."""
    torch.manual_seed(0)
    model = small_model().eval()
    x = torch.randn(3, 3, 64, 48)
    threads = torch.get_num_threads()
    try:
        outputs = []
        for count in (1, 2):
            torch.set_num_threads(count)
            with torch.inference_mode():
                outputs.append(model(x))
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(*outputs)
    kernels = transnext.cpu_window_kernels()
    g, d, h, w, taps, pool = 4, 3, 5, 6, 9, 2
    maps = [torch.randn(g, d, h * w) for _ in range(3)]
    attn = torch.rand(g, h * w, taps + pool)
    with pytest.raises(RuntimeError, match="attn has shape"):
        kernels.window_values(attn[:1], torch.empty(0), maps[2], h, w, 3)
    with pytest.raises(RuntimeError, match="pos has shape"):
        kernels.window_values(attn, torch.randn(g, taps, h * w - 1), maps[2], h, w, 3)
    with pytest.raises(RuntimeError, match="q, k and v has shape"):
        kernels.window_backward(
            maps[0], torch.randn(g, h * w, pool), *maps[:2], maps[2][:1], attn, torch.empty(0), h, w, 3
        )
    with pytest.raises(RuntimeError, match="at least 1 x 1"):
        kernels.window_values(attn, torch.empty(0), maps[2], -h, -w, 3)


@pytest.mark.parametrize(
    "missing, said",
    [
        ("compiler", r"did not build \(Error building extension .*g\+\+: not found\)"),
        ("setuptools", r"cannot be built here \(.*cpp_extension"),  # the GPU node's torch imports it from setuptools
    ],
)
def test_a_machine_that_cannot_build_the_kernels_warns_once_and_runs_the_pytorch_ops(monkeypatch, missing, said):
    from torch.utils import cpp_extension

    def no_compiler(*args, **kwargs):
        raise RuntimeError("Error building extension 'depthbench_transnext_window': g++: not found\nmore detail")

    if missing == "compiler":
        monkeypatch.setattr(cpp_extension, "load", no_compiler)
    else:
        monkeypatch.setitem(sys.modules, "torch.utils.cpp_extension", None)  # its import raises ImportError
        monkeypatch.delattr(torch.utils, "cpp_extension")
    taken = fused_branches_taken(monkeypatch)
    builds = (transnext.cpu_window_kernels, transnext.cpu_convglu_kernels)
    for build in builds:
        build.cache_clear()
    try:
        with pytest.warns(UserWarning, match=said) as caught:
            assert transnext.cpu_window_kernels() is None
            model = small_model().train()
            model(torch.randn(1, 3, 64, 48)).sum().backward()
            with torch.no_grad():
                model.eval()(torch.randn(1, 3, 64, 48))
        for what in ("CPU window kernel", "CPU ConvGLU kernel"):  # cached: once each, not per block
            assert len([w for w in caught if what in str(w.message)]) == 1, what
        assert taken and set(taken) == {"_WindowAttention"}
        assert transnext.cpu_convglu_kernels() is None
    finally:
        for build in builds:
            build.cache_clear()  # the next caller builds (loads) the real kernels again


def test_autocast_takes_the_reference_path_and_trains(monkeypatch):
    """Under autocast the fused window function would meet a float32 softmax and a bf16 gradient in its backward:
    the reference path runs instead (fp32 weights, bf16 autocast on CPU), and the training step goes through."""
    called = fused_branches_taken(monkeypatch)
    monkeypatch.setattr(transnext.AggregatedAttention, "fused_window", True)
    torch.manual_seed(0)
    model = small_model().train()
    x = torch.randn(2, 3, 64, 48)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(x)
    out.float().square().sum().backward()
    assert not called and all(p.grad is not None for p in model.parameters() if p.requires_grad)
    model.zero_grad()
    model(x).square().sum().backward()  # without autocast, fp32: the fused path
    assert called


@pytest.mark.parametrize("cpu_kernel", [True, False])
def test_memory_saving_functions_match_autograd(monkeypatch, cpu_kernel):
    """_L2Normalize and _GatedConvFC (ConvGLU's tail, recomputed in backward; by the CPU kernels, or the PyTorch ops
    with transnext.CPU_CONVGLU_KERNEL = False) give F.normalize's and the plain ConvGLU's values and gradients."""
    monkeypatch.setattr(transnext, "CPU_CONVGLU_KERNEL", cpu_kernel)
    kernel_calls = convglu_kernel_calls(monkeypatch)
    torch.manual_seed(0)
    x = torch.randn(2, 3, 4, 5, dtype=torch.float64, requires_grad=True)
    small = torch.full((1, 4), 0.1, dtype=torch.float64, requires_grad=True)  # norm below eps: the clamped branch
    for t, dim, eps in ((x, 2, 1e-12), (small, -1, 1.0)):
        assert torch.autograd.gradcheck(lambda t: transnext._L2Normalize.apply(t, dim, eps), (t,))
        assert torch.allclose(
            transnext._L2Normalize.apply(t, dim, eps), F.normalize(t, dim=dim, eps=eps), rtol=1e-14, atol=0
        )
    glu = transnext.ConvolutionalGLU(6, 12).double()
    x = torch.randn(2, 4 * 5, 6, dtype=torch.float64, requires_grad=True)
    fused = glu(x, 4, 5)  # grad enabled: the _GatedConvFC path
    fused_grads = torch.autograd.grad(fused.square().sum(), [x, *glu.parameters()])
    hidden = glu.fc2.in_features
    gate, value = F.linear(x, glu.fc1.weight, glu.fc1.bias).split(hidden, -1)
    plain = glu.fc2(glu.act(glu.dwconv(gate, 4, 5)) * value)
    plain_grads = torch.autograd.grad(plain.square().sum(), [x, *glu.parameters()])
    assert torch.allclose(fused, plain, rtol=0, atol=1e-12)
    assert all(torch.allclose(f, p, rtol=0, atol=1e-12) for f, p in zip(fused_grads, plain_grads))
    with torch.no_grad():
        assert torch.allclose(glu(x, 4, 5), plain, rtol=0, atol=1e-12)  # the in-place inference path
    gate, value = (t.detach().requires_grad_() for t in (gate, value))
    for step in (2, 1):  # the whole batch, then one image at a time
        assert torch.autograd.gradcheck(
            lambda g, v: transnext._GatedConvFC.apply(
                g, v, glu.dwconv.dwconv.weight, glu.dwconv.dwconv.bias, glu.fc2.weight, glu.fc2.bias, 4, 5, "none", step
            ),
            (gate, value),
        )
    if cpu_kernel:  # training's forward and backward, and inference's forward (in place)
        assert kernel_calls.count("convglu_forward") >= 2 and "convglu_backward" in kernel_calls
    else:
        assert not kernel_calls


def convglu_kernel_calls(monkeypatch) -> list:
    """The names of the ConvGLU CPU kernels as each is called (the kernels' module wrapped, not rebuilt)."""
    calls, kernels = [], transnext.cpu_convglu_kernels()
    assert kernels is not None, "models/csrc/transnext_convglu.cpp did not build here"

    class Recorded:
        def __getattr__(self, name):
            calls.append(name)
            return getattr(kernels, name)

    monkeypatch.setattr(transnext, "cpu_convglu_kernels", lambda: Recorded())
    return calls


@pytest.mark.parametrize("cpu_kernel", [True, False])
def test_convglu_training_a_few_images_at_a_time_equals_the_whole_batch(monkeypatch, cpu_kernel):
    """In training on the CPU, ConvGLU's tail (_GatedConvFC) runs ``images_per_chunk`` images at a time in both
    passes (CPU_CHUNK_BYTES), by the CPU kernels or the PyTorch ops; the output and every gradient equal the
    whole-batch computation's."""
    monkeypatch.setattr(transnext, "CPU_CONVGLU_KERNEL", cpu_kernel)
    torch.manual_seed(0)
    glu = transnext.ConvolutionalGLU(6, 12).double()
    x = torch.randn(5, 4 * 5, 6, dtype=torch.float64, requires_grad=True)
    per_image = 4 * 5 * glu.fc2.in_features * 8
    steps = []
    real_chunks = transnext._chunks
    monkeypatch.setattr(transnext, "_chunks", lambda t, step: steps.append(step) or real_chunks(t, step))
    results = []
    for budget in (0, 2 * per_image):  # off: the whole batch; on: two images at a time (chunks 2, 2, 1)
        monkeypatch.setattr(transnext, "CPU_CHUNK_BYTES", budget)
        out = glu(x, 4, 5)
        results.append((out, torch.autograd.grad(out.square().sum(), [x, *glu.parameters()])))
    assert steps == [0, 0, 2, 2]  # forward's gate and value chunks, per budget (0: the whole batch)
    (whole, whole_grads), (chunked, chunked_grads) = results
    assert torch.allclose(chunked, whole, rtol=0, atol=1e-13)
    assert len(chunked_grads) == 1 + len(list(glu.parameters()))
    assert all(torch.allclose(c, w, rtol=0, atol=1e-12) for c, w in zip(chunked_grads, whole_grads))


def test_inference_runs_each_stage_a_few_images_at_a_time_with_the_whole_batchs_result(monkeypatch):
    """Without autograd, in eval mode, on the CPU each stage's blocks run on chunks of the batch (CPU_CHUNK_BYTES):
    logits and intermediate maps equal the whole batch's. Not in train mode (DropPath draws masks per sample)."""
    torch.manual_seed(0)
    model = small_model().double().eval()
    x = torch.randn(5, 3, 64, 96, dtype=torch.float64)
    chunked_stages = []
    real_chunks = transnext._chunks
    monkeypatch.setattr(transnext, "_chunks", lambda t, step: chunked_stages.append(bool(step)) or real_chunks(t, step))
    stage1_image = 16 * 24 * model.block1[0].mlp.fc2.in_features * 8  # one image's hidden map at stage 1
    results = []
    for budget in (0, stage1_image):  # off; then stage 1 one image at a time, stage 2 four (4, 1), 3-4 all five
        monkeypatch.setattr(transnext, "CPU_CHUNK_BYTES", budget)
        with torch.no_grad():
            results.append((model(x), model.forward_intermediates(x, intermediates_only=True)))
    assert chunked_stages == [False] * 8 + [True, True, False, False] * 2  # two forwards of four stages each
    (whole, whole_maps), (chunked, chunked_maps) = results
    assert torch.allclose(chunked, whole, rtol=0, atol=1e-12)
    assert all(torch.allclose(c, w, rtol=0, atol=1e-12) for c, w in zip(chunked_maps, whole_maps, strict=True))
    chunked_stages.clear()
    with torch.no_grad():
        model.train()(x)
    assert chunked_stages == []  # train mode: the stages run on the whole batch


def test_per_chunk_parameter_gradients_are_summed_in_at_least_fp32():
    """Under bf16 autocast each chunk's parameter gradient is bf16; their sum is kept in fp32, where 1 + 2⁻⁸
    is not rounded back to 1 (bf16 has 8 significant bits)."""
    total = transnext._accumulated(None, torch.ones(3, dtype=torch.bfloat16))
    for _ in range(300):
        total = transnext._accumulated(total, torch.full((3,), 2.0**-8, dtype=torch.bfloat16))
    assert total.dtype == torch.float32 and torch.equal(total, torch.full((3,), 1 + 300 / 256))
    assert transnext._accumulated(total, None) is total
    assert transnext._accumulated(None, torch.ones(2, dtype=torch.float64)).dtype == torch.float64


def test_images_per_chunk_is_the_whole_batch_off_the_cpu_when_turned_off_or_when_one_image_is_over_budget():
    """0 stands for the whole batch at once."""
    x = torch.empty(8, 100, 4, device="meta")
    assert transnext.images_per_chunk(x, 10, 1 << 20) == 0  # not on the CPU: one chunk
    x = torch.empty(8, 100, 4)
    one_image = 100 * 10 * 4
    assert transnext.images_per_chunk(x, 10, 0) == 0  # turned off
    assert transnext.images_per_chunk(x, 10, one_image - 1) == 0  # one image alone is over the budget
    assert transnext.images_per_chunk(x, 10, one_image) == 1
    assert transnext.images_per_chunk(x, 10, 3 * one_image + 1) == 3
    assert transnext.images_per_chunk(x.bfloat16(), 10, 3 * one_image + 1) == 6  # bytes, not elements
    assert transnext.images_per_chunk(x, 10, 8 * one_image) == 0  # the whole batch fits
    assert transnext.images_per_chunk(x[:0], 10, one_image) == 0  # an empty batch


def test_convglu_compiled_with_a_dynamic_batch_compiles_once():
    """Chunking never decides on the batch size while compiling: a graph compiled with a dynamic batch serves
    every batch size (a step taken from the symbolic size had pinned it, one recompilation per size)."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    glu = transnext.ConvolutionalGLU(6, 12)
    compiled = torch.compile(lambda x: glu(x, 4, 5), backend="aot_eager", dynamic=True)
    for batch in (4, 6, 8):
        compiled(torch.randn(batch, 4 * 5, 6, requires_grad=True)).sum().backward()
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])
    torch._dynamo.reset()


def test_convglu_trains_on_an_empty_batch_with_chunking_off(monkeypatch):
    monkeypatch.setattr(transnext, "CPU_CHUNK_BYTES", 0)  # as on CUDA: the whole batch is one chunk
    glu = transnext.ConvolutionalGLU(6, 12).double()
    x = torch.randn(0, 4 * 5, 6, dtype=torch.float64, requires_grad=True)
    glu(x, 4, 5).sum().backward()
    assert x.grad.shape == x.shape and glu.fc2.weight.grad is not None


def test_cpb_mlp_op_matches_the_mlp_on_its_grid_values_gradients_and_flops():
    """transnext::cpb_mlp (fc1 as a broadcast sum over the coordinate grid, chunked, hidden map recomputed in
    backward) gives the plain MLP's values and parameter gradients on the table, and counts the same MACs."""
    torch.manual_seed(0)
    model = small_model().double()
    attn = model.block1[0].attn
    geometry = model.geometry(0, (20, 28), CPU)
    uh, uw = geometry.bias_table_shape
    table = geometry.bias_table.double()
    grid = table.view(uh, uw, 2)
    params = [attn.cpb_fc1.weight, attn.cpb_fc1.bias, attn.cpb_fc2.weight, attn.cpb_fc2.bias]
    plain = attn.cpb_fc2(torch.relu(attn.cpb_fc1(table)))
    ours = transnext.cpb_mlp(grid[:, 0, 0], grid[0, :, 1], *params)
    weights = torch.randn_like(plain)
    assert torch.allclose(ours, plain, rtol=0, atol=1e-13)
    for a, b in zip(
        torch.autograd.grad((ours * weights).sum(), params), torch.autograd.grad((plain * weights).sum(), params)
    ):
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-12)
    small = [
        p.detach()[:16].clone().requires_grad_()
        if i < 2
        else p.detach()[:, :16].clone().requires_grad_()
        if i == 2
        else p.detach().clone().requires_grad_()
        for i, p in enumerate(params)
    ]
    assert torch.autograd.gradcheck(lambda *p: transnext.cpb_mlp(grid[:5, 0, 0], grid[0, :4, 1], *p), small)
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        transnext.cpb_mlp(grid[:, 0, 0], grid[0, :, 1], *params)
    assert counter.get_total_flops() == 2 * uh * uw * 512 * (2 + attn.num_heads)  # fc1 + fc2, as linear layers


def _peak_bytes_of_op_outputs(fn):
    """Peak bytes of the storages aten ops return during ``fn()`` that are alive at the same time (inputs created
    before the call are not counted)."""
    import weakref

    from torch.utils._python_dispatch import TorchDispatchMode

    class Live(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.sizes, self.refs, self.current, self.peak = {}, {}, 0, 0

        def _release(self, ptr):
            self.refs[ptr] -= 1
            if not self.refs[ptr]:
                self.current -= self.sizes.pop(ptr)
                del self.refs[ptr]

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr():
                    ptr = t.untyped_storage().data_ptr()
                    if ptr not in self.sizes:
                        self.sizes[ptr], self.refs[ptr] = t.untyped_storage().nbytes(), 0
                        self.current += self.sizes[ptr]
                        self.peak = max(self.peak, self.current)
                    self.refs[ptr] += 1
                    weakref.finalize(t, self._release, ptr)
            return out

    with Live() as live:
        fn()
    return live.peak


def test_convglu_inference_keeps_at_most_two_hidden_maps_alive():
    """Inference ConvGLU computes the gate's half, its conv and GELU, then the value's half, freeing each map as
    the next exists: at most two hidden-width maps (+ the output) are alive, where gate, value, conv and GELU
    outputs (four) were — TransNeXt's inference peak, in stage 1 (docs/benchmarks.md)."""
    torch.manual_seed(0)
    glu = transnext.ConvolutionalGLU(8, 48).double().eval()  # hidden = 2/3 · 48 = 32 channels, output 8
    b, h, w = 2, 6, 7
    x = torch.randn(b, h * w, 8, dtype=torch.float64)
    hidden_map = b * h * w * glu.fc2.in_features * 8
    with torch.no_grad():
        peak = _peak_bytes_of_op_outputs(lambda: glu(x, h, w))
    fc1 = glu.fc1.weight.nbytes + glu.fc1.bias.nbytes  # its halves are views (slices) of these, counted whole
    assert peak <= 2 * hidden_map + b * h * w * 8 * 8 + fc1, peak / hidden_map
    assert peak > 2 * hidden_map  # (the tracker does see the two maps)


def test_position_bias_is_cached_without_autograd_and_follows_parameter_updates():
    torch.manual_seed(0)
    model = small_model().double().eval()
    attn = model.block1[0].attn
    geometry = model.geometry(0, (8, 8), CPU)
    with torch.no_grad():
        first = attn.position_bias(geometry, geometry.pool_size)
        assert attn.position_bias(geometry, geometry.pool_size) is first  # cached
        attn.cpb_fc2.bias.add_(1.0)  # an in-place update (optimiser step, load_state_dict) bumps the version
        second = attn.position_bias(geometry, geometry.pool_size)
    assert torch.allclose(second, first + 1.0, rtol=0, atol=1e-12)
    with_grad = attn.position_bias(geometry, geometry.pool_size)  # autograd: recomputed, differentiable
    assert with_grad.requires_grad and with_grad is not second
    other = model.geometry(0, (8, 16), CPU)
    with torch.no_grad():
        assert attn.position_bias(other, other.pool_size).shape == (2, 8 * 16, 2)
    assert "_bias_cache" not in "".join(model.state_dict())


def test_a_model_run_under_inference_mode_still_trains():
    """A first forward under torch.inference_mode (an evaluation, the native benchmark's logits check) caches the
    stages' geometry; the training step after it indexes that geometry and saves it for backward, which an
    inference tensor cannot be ("Inference tensors cannot be saved for backward" before the fix)."""
    torch.manual_seed(0)
    model = small_model()
    image = torch.randn(2, 3, 64, 64)
    with torch.inference_mode():
        model.eval()(image)
    model.train()(image).sum().backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


def test_a_model_counted_twice_on_meta_counts_the_position_bias_mlp_twice():
    """The bias cache keeps nothing on the meta device: a second FLOP count of the same model (verify measures a
    row's model once per column, and consecutive rows share it) sees the log-CPB MLP as the first did."""
    model = build_model("transnext_micro")
    first = count_flops(model, 224)
    assert first.by_op["transnext.cpb_mlp"] > 0
    assert count_flops(model, 224) == first


def test_softmax_is_shared_and_padding_contributes_nothing():
    """With v ≡ 1, proj = identity and learnable tokens 0, each head outputs sum(window + pool weights) = 1
    (one softmax over both paths) plus learnable_bias·(number of in-map window positions)."""
    torch.manual_seed(0)
    model = small_model().double()
    attn = model.block1[0].attn
    c = 48
    with torch.no_grad():
        attn.kv.weight[c:].zero_()
        attn.kv.bias[c:].fill_(1.0)
        attn.proj.weight.copy_(torch.eye(c))
        attn.proj.bias.zero_()
        attn.learnable_tokens.zero_()
        attn.learnable_bias.fill_(0.1)
    h, w = 5, 6
    x = torch.randn(1, h * w, c, dtype=torch.float64)
    out = attn(x, h, w, model.geometry(0, (h, w), CPU)).view(h, w, c)
    rows_in = torch.tensor([3 if 0 < i < h - 1 else 2 for i in range(h)])
    cols_in = torch.tensor([3 if 0 < j < w - 1 else 2 for j in range(w)])
    expected = 1.0 + 0.1 * (rows_in[:, None] * cols_in[None, :]).double()
    assert torch.allclose(out, expected[:, :, None].expand(h, w, c), atol=1e-12)


# ---------------------------------------------------------------------------------------------------------
# architecture audit (spec §3, §7.1, §7.2, §7.4)
# ---------------------------------------------------------------------------------------------------------

EXACT_PARAMS = {
    "transnext_micro": 12_809_304,
    "transnext_tiny": 28_258_960,
    "transnext_small": 49_741_564,
    "transnext_base": 89_721_496,
    "transnext_micro_AAAA": 13_114_008,
    "transnext_micro_aamm": 12_219_624,
    "transnext_micro_ammm": 12_198_744,
    "transnext_micro_mmmm": 12_192_912,
    "transnext_small_384": 49_741_564,
    "transnext_base_384": 89_721_496,
}


@pytest.mark.parametrize("name", list(EXACT_PARAMS))
def test_exact_parameter_counts(name):
    assert count_params(build_model(name)) == EXACT_PARAMS[name]


def test_special_parameter_totals_and_roadmap_step6():
    def total(model, word):
        return sum(p.numel() for n, p in model.named_parameters() if word in n)

    tiny, micro = build_model("transnext_tiny"), build_model("transnext_micro")
    assert total(tiny, "query_embedding") == 5_904
    assert total(tiny, "learnable_") == 44_550
    assert total(tiny, "cpb_fc") == 158_454
    assert total(tiny, "relative_pos_bias_local") == 1_782
    assert (
        total(micro, "query_embedding"),
        total(micro, "learnable_"),
        total(micro, "cpb_fc"),
        total(micro, "relative_pos_bias_local"),
    ) == (3_936, 29_700, 116_388, 1_188)
    step6 = build_model("transnext_micro", query_embedding=False, positional_attention=False)
    assert count_params(step6) == 12_775_668


@pytest.mark.parametrize(
    "name, size, gflops",
    [  # the others are checked to the paper's rounding by verify below
        ("transnext_micro", 224, 2.664),
        ("transnext_tiny", 224, 5.734),
        ("transnext_tiny", 384, 17.761),
        ("transnext_base_384", 384, 56.344),
        ("transnext_micro_AAAA", 256, 3.345),
    ],
)
def test_flops_match_spec_within_0p05g(name, size, gflops):
    assert abs(count_flops(build_model(name), size).giga - gflops) <= 0.05


def test_window_products_are_counted():
    """Eq. 15: the window path costs 2·HW·k²·C MACs per AA layer (q·k over the window and the weighted sum of v);
    Tiny's total (0.027 G) is below the 0.05 G tolerance of the totals above, so it is checked on its own."""
    by_op = count_flops(build_model("transnext_tiny"), 224).by_op
    expected = sum(2 * side * side * 9 * c * depth for side, c, depth in ((56, 72, 2), (28, 144, 2), (14, 288, 15)))
    assert by_op.get("transnext.window_qk", 0) + by_op.get("transnext.window_av", 0) == expected


def test_multiresolution_flops_normal_vs_linear():
    """Spec §7.2: at 256² linear mode costs *more* than normal mode (its pooled coordinates are fractional, so the
    CPB table is larger), at 480² less (quadratic vs linear pooled path)."""
    normal, linear = build_model("transnext_tiny"), build_model("transnext_tiny", pool_mode="linear")
    assert abs(count_flops(normal, 256).giga - 7.555) <= 0.05
    assert abs(count_flops(linear, 256).giga - 7.642) <= 0.05
    assert abs(count_flops(linear, 480).giga - 26.643) <= 0.05


def test_geometry_tables_and_length_scale_at_224_and_384():
    model = build_model("transnext_tiny")
    tables = {224: (10816, 2704, 676, 169), 384: (33856, 8464, 2116, 529)}
    for size, expected in tables.items():
        for stage in range(4):
            hw = transnext.stage_size((size, size), stage)
            assert hw == (size // 2 ** (stage + 2),) * 2
            geo = model.geometry(stage, hw, CPU)
            assert geo.bias_table.shape == (expected[stage], 2)
            pool = geo.pool_size[0] * geo.pool_size[1]
            assert geo.bias_index_h.numel() * geo.bias_index_w.numel() == hw[0] * hw[1] * pool  # N·P pairs
    for stage, side in enumerate((56, 28, 14)):
        geo = model.geometry(stage, (side, side), CPU)
        counts = geo.seq_length_scale.exp().round().view(side, side)
        assert (counts[0, 0].item(), counts[0, side // 2].item(), counts[side // 2, side // 2].item()) == (53, 55, 58)
        valid = torch.isfinite(geo.local_mask).sum(-1).view(side, side)
        assert (valid[0, 0].item(), valid[side // 2, 0].item(), valid[3, 3].item()) == (4, 6, 9)
    assert model.geometry(3, (7, 7), CPU).seq_length_scale.exp().round().unique().tolist() == [49.0]


def test_initial_values_drop_path_and_convglu_widths():
    model = build_model("transnext_tiny", device="cpu", drop_path_rate=0.25)
    temp = F.softplus(model.block1[0].attn.temperature)
    assert torch.allclose(temp, torch.full_like(temp, 1 / 0.24), atol=1e-5)
    rates = [getattr(blk.drop_path, "drop_prob", 0.0) for i in range(1, 5) for blk in getattr(model, f"block{i}")]
    assert len(rates) == 21
    assert all(math.isclose(r, 0.25 * i / 20, abs_tol=1e-6) for i, r in enumerate(rates))
    widths = [getattr(model, f"block{i}")[0].mlp.fc2.in_features for i in range(1, 5)]
    assert widths == [384, 768, 768, 1536]


def test_convglu_gate_is_first_half_and_delta_dwconv_gives_glu():
    torch.manual_seed(0)
    glu = transnext.ConvolutionalGLU(16, 24).double()
    with torch.no_grad():
        glu.dwconv.dwconv.weight.zero_()
        glu.dwconv.dwconv.weight[:, :, 1, 1] = 1.0
        glu.dwconv.dwconv.bias.zero_()
    x = torch.randn(2, 12, 16, dtype=torch.float64)
    hidden = glu.fc2.in_features
    gate = x @ glu.fc1.weight[:hidden].T + glu.fc1.bias[:hidden]
    value = x @ glu.fc1.weight[hidden:].T + glu.fc1.bias[hidden:]
    expected = (F.gelu(gate) * value) @ glu.fc2.weight.T + glu.fc2.bias
    assert torch.allclose(glu(x, 3, 4), expected, atol=1e-12)


def test_pyramid_shapes_tiny_512_on_meta():
    model = build_model("transnext_tiny")
    feats = model.forward_intermediates(torch.empty(2, 3, 512, 512, device="meta"), intermediates_only=True)
    assert [tuple(f.shape) for f in feats] == [(2, 72, 128, 128), (2, 144, 64, 64), (2, 288, 32, 32), (2, 576, 16, 16)]
    dino_4scale = model.forward_intermediates(
        torch.empty(1, 3, 512, 512, device="meta"), (1, 2, 3), intermediates_only=True
    )
    assert [tuple(f.shape) for f in dino_4scale] == [(1, 144, 64, 64), (1, 288, 32, 32), (1, 576, 16, 16)]


def test_features_only_is_the_stage_maps_and_pruning_keeps_them():
    import timm

    torch.manual_seed(0)
    model = timm.create_model("transnext_micro", depths=(1, 1, 1, 1)).eval()
    torch.manual_seed(0)  # the same initialisation: features_only builds the whole model, then prunes it
    features = timm.create_model("transnext_micro", depths=(1, 1, 1, 1), features_only=True, out_indices=(1, 2)).eval()
    x = torch.randn(1, 3, 96, 128)
    with torch.no_grad():
        final, maps = model.forward_intermediates(x)
        assert torch.equal(final, model.forward_features(x))
        assert [tuple(m.shape[1:]) for m in maps] == [(48, 24, 32), (96, 12, 16), (192, 6, 8), (384, 3, 4)]
        assert features.feature_info.channels() == [96, 192] and features.feature_info.reduction() == [8, 16]
        kept = {k.split(".")[1] for k in features.state_dict()}
        assert kept == {
            "patch_embed1",
            "block1",
            "norm1",
            "patch_embed2",
            "block2",
            "norm2",
            "patch_embed3",
            "block3",
            "norm3",
        }  # stage 4 and the head are pruned
        for ours, full in zip(features(x), maps[1:3]):
            assert torch.equal(ours, full)


# ---------------------------------------------------------------------------------------------------------
# running: every variant, any size, modes, batch independence, cache
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", VARIANTS + ["transnext_micro_mmmm"])
def test_forward_backward_every_variant(name):
    torch.manual_seed(0)
    # built on meta and filled cheaply: the full initialisation of Base takes longer than its forward/backward
    model = build_model(name, drop_path_rate=0.1, num_classes=7).to_empty(device="cpu")
    with torch.no_grad():
        for p in model.parameters():
            p.uniform_(0.5, 1.0) if p.ndim == 1 else p.normal_(0, 0.02)
    model.train()
    x = torch.randn(2, 3, 32, 48)
    out = model(x)
    assert out.shape == (2, 7)
    out.logsumexp(-1).sum().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
    assert not missing


@pytest.mark.parametrize("size", [(138, 138), (224, 160), (512, 512)])
def test_micro_runs_at_any_size(size):
    torch.manual_seed(0)
    model = build_model("transnext_micro", device="cpu").eval()
    with torch.no_grad():
        out = model(torch.randn(1, 3, *size))
    assert out.shape == (1, 1000) and torch.isfinite(out).all()


def test_batch_elements_are_independent():
    torch.manual_seed(0)
    model = small_model().eval()
    x = torch.randn(3, 3, 72, 88)
    with torch.no_grad():
        together = model(x)
        alone = torch.cat([model(x[i : i + 1]) for i in range(3)])
    assert torch.allclose(together, alone, atol=1e-5, rtol=1e-5)


def _same_weights(reference_model, **kwargs):
    model = small_model(**kwargs).eval()
    model.load_state_dict(reference_model.state_dict(), strict=True)
    return model


def first_attention_output(model, image):
    tokens, h, w = model.patch_embed1(image)
    return model.block1[0].attn(model.block1[0].norm1(tokens), h, w, model.geometry(0, (h, w), CPU))


def test_modes_identical_at_training_size_and_different_elsewhere():
    """Spec §7.14: at 224 normal, linear (pool 7) and interpolation mode agree exactly; at 256 they differ."""
    torch.manual_seed(0)
    normal = small_model().eval()
    randomize_special_parameters(normal, std=0.2)
    linear = _same_weights(normal, pool_mode="linear")
    interp = _same_weights(normal, position_bias="interpolate")
    frozen = _same_weights(normal, length_scaling=False)
    assert linear.fixed_pool_size == (7, 7)
    x224, x256 = torch.randn(1, 3, 224, 224), torch.randn(1, 3, 256, 256)
    with torch.no_grad():
        ref224 = normal(x224)
        for other in (linear, interp, frozen):
            assert torch.equal(other(x224), ref224)
        ref256 = first_attention_output(normal, x256)
        for other in (linear, interp, frozen):
            assert (first_attention_output(other, x256) - ref256).abs().max() > 1e-3 * ref256.abs().max()


def test_no_length_scaling_keeps_the_224_key_counts():
    """Spec §8.4: at 256² log N keeps its 224² values, 53/55/58 (corner/edge/interior) at stages 1-3 and 49 at
    stage 4; with length scaling the 8×8 pool (256/32) counts instead."""
    frozen, scaled = small_model(length_scaling=False), small_model()
    for model, pooled_keys in ((frozen, 49), (scaled, 64)):
        counts = model.geometry(0, (64, 64), CPU).seq_length_scale.exp().round().view(64, 64)
        assert (counts[0, 0].item(), counts[0, 5].item(), counts[5, 5].item()) == (
            4 + pooled_keys,
            6 + pooled_keys,
            9 + pooled_keys,
        )
    assert frozen.geometry(3, (8, 8), CPU).seq_length_scale.exp().round().unique().tolist() == [49.0]
    assert scaled.geometry(3, (8, 8), CPU).seq_length_scale.exp().round().unique().tolist() == [64.0]


def test_interpolation_with_reference_equal_to_input_is_extrapolation():
    torch.manual_seed(0)
    extrap = small_model().eval()
    randomize_special_parameters(extrap, std=0.2)
    interp = _same_weights(extrap, img_size=(96, 160), pretrain_size=224, position_bias="interpolate")
    x = torch.randn(1, 3, 96, 160)
    with torch.no_grad():
        assert torch.equal(interp(x), extrap(x))
    assert interp.geometry(0, (24, 40), CPU).bias_query == (24, 40)
    assert interp.geometry(0, (30, 30), CPU).bias_query == (24, 40)  # other sizes: generated at img_size


def test_geometry_cache_follows_the_input_size():
    torch.manual_seed(0)
    model = small_model().eval()
    a, b = torch.randn(1, 3, 64, 64), torch.randn(1, 3, 96, 80)
    with torch.no_grad():
        first = model(a)
        model(b)
        again = model(a)
    assert torch.equal(first, again)
    keys = {(stage, size) for stage, size, _ in model.geometries._cache}
    assert {(0, (16, 16)), (0, (24, 20)), (3, (2, 2)), (3, (3, 3))} <= keys
    assert model.geometry(0, (24, 20), CPU).pool_size == (3, 2)
    assert not any("geometry" in k or "seq_length" in k for k in model.state_dict())


# ---------------------------------------------------------------------------------------------------------
# official checkpoints
# ---------------------------------------------------------------------------------------------------------


def official_keys(dims, heads, depths, mlp_ratios, sr_ratios, num_classes=1000, window=3):
    """State-dict names and shapes of an official TransNeXt checkpoint, from the naming scheme of the official
    code (shared/notes/anchors.md §1.3), written out independently of the model code."""
    keys = {}
    prev = 3
    for i, (c, h, depth, r, sr) in enumerate(zip(dims, heads, depths, mlp_ratios, sr_ratios), start=1):
        kernel = 7 if i == 1 else 3
        keys[f"patch_embed{i}.proj.weight"] = (c, prev, kernel, kernel)
        keys.update(
            {f"patch_embed{i}.proj.bias": (c,), f"patch_embed{i}.norm.weight": (c,), f"patch_embed{i}.norm.bias": (c,)}
        )
        hidden = int(2 * int(c * r) / 3)
        for j in range(depth):
            p = f"block{i}.{j}."
            keys.update(
                {
                    p + "norm1.weight": (c,),
                    p + "norm1.bias": (c,),
                    p + "norm2.weight": (c,),
                    p + "norm2.bias": (c,),
                    p + "attn.temperature": (h, 1, 1),
                    p + "attn.query_embedding": (h, 1, c // h),
                    p + "attn.cpb_fc1.weight": (512, 2),
                    p + "attn.cpb_fc1.bias": (512,),
                    p + "attn.cpb_fc2.weight": (h, 512),
                    p + "attn.cpb_fc2.bias": (h,),
                    p + "attn.proj.weight": (c, c),
                    p + "attn.proj.bias": (c,),
                    p + "mlp.fc1.weight": (2 * hidden, c),
                    p + "mlp.fc1.bias": (2 * hidden,),
                    p + "mlp.dwconv.dwconv.weight": (hidden, 1, 3, 3),
                    p + "mlp.dwconv.dwconv.bias": (hidden,),
                    p + "mlp.fc2.weight": (c, hidden),
                    p + "mlp.fc2.bias": (c,),
                }
            )
            if sr == 1:
                keys.update({p + "attn.qkv.weight": (3 * c, c), p + "attn.qkv.bias": (3 * c,)})
            else:
                keys.update(
                    {
                        p + "attn.q.weight": (c, c),
                        p + "attn.q.bias": (c,),
                        p + "attn.kv.weight": (2 * c, c),
                        p + "attn.kv.bias": (2 * c,),
                        p + "attn.sr.weight": (c, c, 1, 1),
                        p + "attn.sr.bias": (c,),
                        p + "attn.norm.weight": (c,),
                        p + "attn.norm.bias": (c,),
                        p + "attn.relative_pos_bias_local": (h, window**2),
                        p + "attn.learnable_tokens": (h, c // h, window**2),
                        p + "attn.learnable_bias": (h, 1, window**2),
                    }
                )
        keys.update({f"norm{i}.weight": (c,), f"norm{i}.bias": (c,)})
        prev = c
    keys.update({"head.weight": (num_classes, dims[-1]), "head.bias": (num_classes,)})
    return keys


@pytest.mark.parametrize(
    "name, cfg",
    [
        ("transnext_micro", ((48, 96, 192, 384), (2, 4, 8, 16), (2, 2, 15, 2), (8, 8, 4, 4), (8, 4, 2, 1))),
        ("transnext_base", ((96, 192, 384, 768), (4, 8, 16, 32), (5, 5, 23, 5), (8, 8, 4, 4), (8, 4, 2, 1))),
        ("transnext_micro_AAAA", ((48, 96, 192, 384), (2, 4, 8, 16), (2, 2, 15, 2), (8, 8, 4, 4), (16, 8, 4, 2))),
    ],
)
def test_state_dict_names_and_shapes_are_official(name, cfg):
    ours = {k: tuple(v.shape) for k, v in build_model(name).state_dict().items()}
    assert ours == official_keys(*cfg)


def test_official_state_dict_loads_strict_at_any_size_and_mode_and_round_trips(tmp_path):
    torch.manual_seed(0)
    cfg = ((48, 96, 192, 384), (2, 4, 8, 16), (2, 2, 15, 2), (8, 8, 4, 4), (8, 4, 2, 1))
    state = {k: torch.randn(shape) * 0.02 for k, shape in official_keys(*cfg).items()}
    for kwargs in (
        {},
        {"img_size": 384, "pretrain_size": 224},
        {"img_size": 640},
        {"fixed_pool_size": 7},
        {"position_bias": "interpolate", "img_size": 800, "pretrain_size": 224},
    ):
        build_model("transnext_micro", **kwargs).load_state_dict(state, strict=True, assign=True)  # meta: names+shapes
    model = build_model("transnext_micro", device="cpu").eval()
    model.load_state_dict(state, strict=True)
    path = tmp_path / "transnext_micro_224_1k.pth"
    torch.save({"model": state}, path)  # the official training script's wrapping
    loaded = timm.create_model("transnext_micro", pretrained=True, pretrained_cfg_overlay=dict(file=str(path))).eval()
    x = torch.randn(1, 3, 96, 128)
    with torch.no_grad():
        assert torch.equal(loaded(x), model(x))


# ---------------------------------------------------------------------------------------------------------
# optimiser groups, API, errors, registration, verify
# ---------------------------------------------------------------------------------------------------------


def test_no_weight_decay_names_and_timm_param_groups():
    model = build_model("transnext_micro", device="cpu")
    assert model.no_weight_decay_keywords() == {"query_embedding", "relative_pos_bias_local", "cpb", "temperature"}
    names = model.no_weight_decay()
    assert "block1.0.attn.query_embedding" in names and "block4.1.attn.cpb_fc1.weight" in names
    assert not any("learnable_tokens" in n or "learnable_bias" in n for n in names)
    optimizer = create_optimizer_v2(model, "adamw", lr=1e-3, weight_decay=0.05)  # calls model.no_weight_decay()
    by_id = {id(p): g["weight_decay"] for g in optimizer.param_groups for p in g["params"]}
    params = dict(model.named_parameters())
    for n, p in params.items():
        no_decay = p.ndim <= 1 or n.endswith(".bias") or any(k in n for k in model.no_weight_decay_keywords())
        assert by_id[id(p)] == (0.0 if no_decay else 0.05), n
    assert by_id[id(params["block1.0.attn.learnable_tokens"])] == 0.05


def test_bad_arguments_say_what_to_do():
    with pytest.raises(ValueError, match="pool_mode must be 'normal' or 'linear'"):
        small_model(pool_mode="fixed")
    with pytest.raises(ValueError, match="use pool_mode='linear'"):
        small_model(pool_mode="normal", fixed_pool_size=7)
    with pytest.raises(ValueError, match="window_size must be odd"):
        small_model(window_size=(4, 3, 3, None))
    with pytest.raises(ValueError, match="position_bias must be"):
        small_model(position_bias="nearest")
    with pytest.raises(ValueError, match="depths has 3 entries"):
        small_model(depths=(1, 1, 1))
    with pytest.raises(AssertionError, match="feature index 4 is out of range"):  # timm's index check
        small_model().forward_intermediates(torch.empty(1, 3, 64, 64, device="meta"), (0, 4))
    with pytest.raises(ValueError, match="output_fmt must be 'NCHW'"):
        small_model().forward_intermediates(torch.empty(1, 3, 64, 64, device="meta"), output_fmt="NHWC")


def test_swattention_detected_with_importlib(monkeypatch):
    monkeypatch.setattr(transnext, "_SWATTENTION", None)
    monkeypatch.setattr(transnext, "_SWATTENTION_FAILED", False)
    monkeypatch.setattr(transnext, "find_spec", lambda name: None)
    assert not transnext.swattention_available()
    fake = type(sys)("swattention")
    monkeypatch.setitem(sys.modules, "swattention", fake)
    monkeypatch.setattr(transnext, "find_spec", lambda name: object() if name == "swattention" else None)
    assert transnext.swattention_available()
    # never used for CPU tensors, whatever is installed
    model = small_model()
    assert not model.block1[0].attn._use_swattention(torch.empty(1, device="cpu"))


class UnfoldSwattention:
    """CPU stand-in for the official `swattention` extension, written from its documented semantics (spec §2.9,
    official attention_cuda.py): (B, heads, N, d) operands, 3×3 windows via nn.Unfold, -inf outside the map;
    backward functions return the gradients of the forward ones."""

    @staticmethod
    def _windows(t, height, width, k):  # (B, heads, N, d) -> (B, heads, N, k², d), zero outside the map
        b, heads, n, d = t.shape
        cols = F.unfold(t.reshape(b * heads, height, width, d).permute(0, 3, 1, 2), k, padding=k // 2)
        return cols.view(b, heads, d, k * k, n).permute(0, 1, 4, 3, 2)

    def qk_rpb_forward(self, query, key, rpb, height, width, k, threads):
        attn = torch.einsum("bhnd,bhnld->bhnl", query, self._windows(key, height, width, k)) + rpb[:, None]
        inside = self._windows(torch.ones_like(key[..., :1]), height, width, k)[..., 0] > 0
        return attn.masked_fill(~inside, float("-inf"))

    def av_forward(self, attn, value, height, width, k, threads):
        return torch.einsum("bhnl,bhnld->bhnd", attn, self._windows(value, height, width, k))

    @staticmethod
    def _grads(forward, grad, *inputs):
        with torch.enable_grad():
            inputs = [t.detach().requires_grad_() for t in inputs]
            return torch.autograd.grad(forward(*inputs), inputs, grad)

    def qk_rpb_backward(self, grad, query, key, height, width, k, threads):
        rpb = torch.zeros(query.shape[1], k * k, dtype=query.dtype)
        return self._grads(
            lambda q, kk, r: self.qk_rpb_forward(q, kk, r, height, width, k, threads), grad, query, key, rpb
        )

    def av_backward(self, grad, attn, value, height, width, k, threads):
        return self._grads(lambda a, v: self.av_forward(a, v, height, width, k, threads), grad, attn, value)


def _output_and_grads(model, x):
    model.zero_grad()
    out = model(x)
    out.square().sum().backward()
    return out.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


def test_swattention_path_matches_native(monkeypatch):
    """The swattention branch (layouts, transposes, autograd wrappers) against the native ops, on CPU with a
    stand-in extension; an extension whose functions take other arguments falls back to native with a warning."""
    torch.manual_seed(0)
    model = small_model().double()
    randomize_special_parameters(model)
    x = torch.randn(2, 3, 40, 56, dtype=torch.float64)
    native, native_grads = _output_and_grads(model, x)
    monkeypatch.setattr(
        transnext.AggregatedAttention, "_use_swattention", lambda self, x: transnext._SWATTENTION is not None
    )
    monkeypatch.setattr(transnext, "_SWATTENTION_FAILED", False)
    monkeypatch.setattr(transnext, "_SWATTENTION", UnfoldSwattention())
    fast, fast_grads = _output_and_grads(model, x)
    assert torch.allclose(fast, native, rtol=0, atol=1e-10)
    assert all(torch.allclose(fast_grads[n], g, rtol=0, atol=1e-10) for n, g in native_grads.items())

    incompatible = UnfoldSwattention()
    incompatible.qk_rpb_forward = lambda query, key, rpb, height, width, k: None  # an older signature
    monkeypatch.setattr(transnext, "_SWATTENTION", incompatible)
    with pytest.warns(RuntimeWarning, match="falling back to the native"):
        fallback, _ = _output_and_grads(model, x)
    assert torch.allclose(fallback, native, rtol=0, atol=1e-10)
    assert transnext._SWATTENTION is None


def test_registered_names_and_default_cfgs():
    names = set(timm.list_models(module="transnext"))
    assert set(VARIANTS) | {"transnext_small_384", "transnext_base_384"} <= names
    assert timm.models.get_pretrained_cfg("transnext_base_384").input_size == (3, 384, 384)
    assert timm.models.get_pretrained_cfg("transnext_micro_AAAA").input_size == (3, 256, 256)
    model = build_model("transnext_small_384")
    assert (model.img_size, model.pretrain_size) == ((384, 384), (224, 224))


def test_verify_rows_of_transnext_models_pass():
    """`depthbench verify` on every row of the tables that builds a TransNeXt model (all tables)."""
    rows = [
        row
        for table in paper_tables.load_paper("transnext")
        for row in table.rows
        if row.model and row.model.startswith("transnext") and set(row.paper) & set(MEASURES)
    ]
    assert len(rows) >= 20
    distinct = {}  # many rows repeat a model with the same printed numbers; audit each combination once
    for row in rows:
        key = (
            row.model,
            repr(sorted(row.model_kwargs.items())),
            repr(row.input_size),
            repr(sorted((k, v) for k, v in row.paper.items() if k in MEASURES)),
        )
        distinct.setdefault(key, row)
    from harness.workflows.audit import dense_counter

    audit = Audit(cache=False, dense=dense_counter())  # the dense rows (Tables 12-15) count whole detectors
    checks = [c for row in distinct.values() for c in audit.check_row(row)]
    failed = [(c.table, c.row, c.column, c.paper_value, c.ours) for c in checks if c.status != "pass"]
    assert checks and not failed


def test_a_training_step_under_bf16_autocast():
    """TransNeXt's recipes train in bf16: the fused ConvGLU's recompute in backward must run in the forward's
    dtype (it ran in fp32 and met bf16 activations; found by the GPU check, tests/tools/test_gpu_check.py)."""
    model = build_model("transnext_micro", device="cpu", img_size=64).train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(torch.randn(2, 3, 64, 64))
    out.float().sum().backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and g.dtype == torch.float32 and torch.isfinite(g).all() for g in grads)


# ---------------------------------------------------------------------------------------------------------
# channel mixer option (ffn): Table 2's roadmap steps 4-5 and the plain-MLP arm of the claims
# ---------------------------------------------------------------------------------------------------------

MINI_CLAIMS_CONFIG = Path(__file__).resolve().parents[2] / "configs/claims/transnext-mini-aggregated_1xb64-2e_glyphs.py"


def _mini_claims_model(ffn: str, device="meta") -> TransNeXt:
    from harness.core.config import load_config
    from harness.engine.models import model_kwargs

    cfg = load_config(MINI_CLAIMS_CONFIG, [])
    return build_model(cfg.model.name, device=device, **{**model_kwargs(cfg), "ffn": ffn})


@pytest.mark.parametrize(
    "ffn, layer", [("convglu", transnext.ConvolutionalGLU), ("glu", transnext.GatedLinearUnit), ("mlp", transnext.Mlp)]
)
def test_every_ffn_builds_and_runs_forward_backward(ffn, layer):
    torch.manual_seed(0)
    model = timm.create_model(
        "transnext_micro",
        ffn=ffn,
        embed_dims=(24, 48, 48, 48),
        num_heads=(1, 2, 2, 2),
        depths=(1, 1, 1, 1),
        mlp_ratios=(4, 4, 4, 4),
        img_size=64,
        num_classes=5,
    ).train()
    assert model.ffn == ffn
    assert all(type(getattr(model, f"block{i}")[0].mlp) is layer for i in range(1, 5))
    mixer_keys = {k.split("mlp.", 1)[1] for k in model.state_dict() if ".mlp." in k}
    dwconv = {"dwconv.dwconv.weight", "dwconv.dwconv.bias"}
    assert mixer_keys == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"} | (dwconv if ffn == "convglu" else set())
    # widths: the GLUs' hidden is 2/3 of the nominal C·4 (fc1 makes gate and value), the MLP's the full C·4
    fc1 = model.block1[0].mlp.fc1
    assert fc1.out_features == (96 if ffn == "mlp" else 2 * 64)
    out = model(torch.randn(2, 3, 40, 56))
    assert out.shape == (2, 5)
    out.logsumexp(-1).sum().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
    assert not missing


def test_default_ffn_is_the_convglu_with_the_official_keys():
    default, explicit = small_model(), small_model(ffn="convglu")
    assert default.ffn == "convglu" and type(default.block1[0].mlp) is transnext.ConvolutionalGLU
    assert {k: v.shape for k, v in default.state_dict().items()} == {
        k: v.shape for k, v in explicit.state_dict().items()
    }


def test_glu_equals_convglu_whose_dwconv_is_a_centred_delta():
    """Table 2 step 5 adds the depthwise conv to the GLU: with a centred-delta kernel and zero bias ConvGLU is the
    plain GLU, so ``ffn='glu'`` with the same fc1/fc2 weights must give the same logits and gradients (in training,
    where ConvGLU runs the fused _GatedConvFC, and in inference, its in-place path)."""
    torch.manual_seed(0)
    conv = small_model(ffn="convglu").double()
    randomize_special_parameters(conv)
    with torch.no_grad():
        for name, p in conv.named_parameters():
            if "mlp.fc" in name and name.endswith("bias"):
                p.normal_(0, 0.5)  # nonzero biases: the gate/value halves of fc1 must line up
    glu = small_model(ffn="glu").double()
    x = torch.randn(2, 3, 64, 48, dtype=torch.float64)

    def copy_and_compare():
        state = {k: v for k, v in conv.state_dict().items() if "mlp.dwconv" not in k}
        glu.load_state_dict(state, strict=True)  # every GLU parameter is ConvGLU's, of the same shape
        outs, grads = [], []
        for model in (conv, glu):
            model.train()
            out = model(x)
            named = dict(model.named_parameters())
            grads.append(torch.autograd.grad(out.square().sum(), [named[k] for k in state if k in named]))
            outs.append(out)
        with torch.no_grad():
            infer = [m.eval()(x) for m in (conv, glu)]
        same_grads = all(torch.allclose(a, b, rtol=1e-9, atol=1e-12) for a, b in zip(*grads))
        return torch.allclose(*outs, rtol=0, atol=1e-10) and same_grads and torch.allclose(*infer, rtol=0, atol=1e-10)

    assert not copy_and_compare()  # ConvGLU's random 3x3 conv: a different function (the check can fail)
    with torch.no_grad():
        for i in range(1, 5):
            for blk in getattr(conv, f"block{i}"):
                w = blk.mlp.dwconv.dwconv
                w.weight.zero_()
                w.weight[:, :, 1, 1] = 1.0
                w.bias.zero_()
    assert copy_and_compare()


def test_mini_claims_ffn_parameter_counts_are_equal_up_to_the_dwconv():
    """The channel-mixer arms of results/tables/claims/transnext.yaml: the 2/3-width GLU and the full-width MLP have
    the same parameters within 1 %, and ConvGLU adds exactly its depthwise convs (3x3 weights + bias per hidden
    channel). FLOPs are counted by the one counter on each."""
    models_ = {ffn: _mini_claims_model(ffn) for ffn in transnext.FFN_LAYERS}
    params = {ffn: count_params(m) for ffn, m in models_.items()}
    assert abs(params["mlp"] / params["glu"] - 1) < 0.01
    dwconv = sum(p.numel() for n, p in models_["convglu"].named_parameters() if ".mlp.dwconv." in n)
    hidden = [int(2 * c * 4 / 3) for c, d in zip((32, 64, 128, 256), (2, 2, 2, 1)) for _ in range(d)]
    assert dwconv == sum(10 * h for h in hidden) > 0
    assert params["convglu"] - params["glu"] == dwconv
    assert params["convglu"] == 1_763_677  # the claims file's setting (1.76M); the token-mixer arms are unchanged
    flops = {ffn: count_flops(m, 32).total for ffn, m in models_.items()}
    assert flops["convglu"] > flops["mlp"] > flops["glu"] > 0


def test_unknown_ffn_raises_with_the_allowed_names():
    with pytest.raises(ValueError, match="ffn must be one of 'convglu', 'glu', 'mlp', not 'swiglu'"):
        small_model(ffn="swiglu")
    with pytest.raises(ValueError, match="ffn must be one of"):
        timm.create_model("transnext_micro", ffn="ConvGLU", device="meta")
    with pytest.raises(ValueError, match="ffn must be one of"):
        transnext.Block(48, 2, ffn="convffn")
