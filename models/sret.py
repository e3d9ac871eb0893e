"""SReT — Sliced Recursive Transformer (Shen, Liu, Xing; ICLR-2022 submission text, ECCV 2022).

Paper: the ICLR-2022 submission text (sections, equations, tables and appendices below refer to it); what the
code relies on beyond the paper (official code, our choices where it is silent) is in docs/sret.md. The official
repository (``szq0214/SReT``) holds only model files; these models keep its parameter names, so its checkpoints
load with ``strict=True`` through the one weights loader (``harness.engine.checkpoint.load_weights``, or timm's
``pretrained_cfg_overlay={"file": ...}``), both of which pass them through :func:`checkpoint_filter_fn`.

timm's model API: ``forward_features`` (the last stage map) / ``forward_head`` (GAP → LayerNorm → classifier),
``forward_intermediates`` + ``feature_info`` + ``prune_intermediate_layers`` (``features_only=True`` gives the 3
stage maps), ``device``/``dtype`` construction, ``fixed_input_size`` cfgs (the positional embedding is fixed to
``img_size``). torch.fx traces it and TorchScript compiles it, with the same outputs (the recursion is a loop
over the official block list, per-application settings are typed lists; docs/sret.md). A scripted model in
training mode returns one tensor where the eager one returns two (``distill_head``, mixed depth), as timm's
distilled DeiT does.

Mechanism (Sec. 3-4, App. D):

* **Recursion.** Each distinct transformer block runs ``loops`` times in a row with the same weights (internal
  loop, default 2). Every application is followed by its own, never shared, non-linear projection (NLL,
  ``LN → MLP`` with a residual), so a stage with A distinct blocks has ``A·loops`` NLLs.
* **Learnable residual coefficients (LRC).** One scalar per residual branch, initialised to 1:
  ``c1·x + c2·attn``, ``c3·x + c4·ffn`` in a block, ``c1·x + c2·mlp`` in an NLL. A shared block shares its
  coefficients across its loops. ``lrc=`` selects Table 11's designs (``both``, ``identity``, ``branch``,
  ``none``). :func:`lrc_coefficients` returns the values per module, by role, for coefficient-evolution plots.
* **Sliced group self-attention.** Loop 0 of a block uses ``groups[stage][0]`` contiguous groups and no
  permutation; later loops use ``groups[stage][1]`` (the last entry repeats for >2 loops) after one token
  permutation that is undone *before* the output projection (Algorithm 1). Final design ``[8,2][4,1][1,1]``.
* **Backbone.** 3-conv stem (stride 8), learnable positional embedding, 3 stages (28²/14²/7² tokens at 224²),
  depthwise 3×3/s2 conv pooling between stages, GAP → LayerNorm → Linear. No class token.

Permutation at evaluation. The official code draws a fresh random permutation at evaluation too, so a
checkpoint's logits change from call to call (docs/sret.md). Here evaluation is deterministic by default
(``eval_permutation="fixed"``): each block application uses a permutation drawn once from a CPU
``torch.Generator`` seeded with ``permutation_seed + application index``. This is the "seed the RNG" remedy
(docs/sret.md) made per model, and it keeps what the network was trained on: a random permutation (the
identity would split the map into contiguous bands, a grouping training never produced). ``"random"``
restores the official stochastic behaviour; ``"identity"`` disables it for analysis. Training always draws a
fresh permutation per step on the input's device (``torch.randperm``, reproducible with
``torch.manual_seed``).

Ablations are constructor arguments, not code (paper tables in ``results/tables/sret.yaml``):
``loops`` (recursion count), ``groups``/``groups1``/``groups2`` (Table 5), ``permutation`` (Table 5's
P / P+I / P+I−L), ``lrc`` (Table 11), ``stem="patch"`` and ``class_token=True`` (Table 3's rows without the
stem / with a class token, [assumption]: PiT's 16×16/s8 patch conv and PiT's class-token FC in the pooling),
``nll``/``nll_ratio``, ``drop_path_schedule``, ``mixed_depth``.

Mixed-depth training (App. B). With ``mixed_depth=True`` the model also runs a *shallow* branch on
the same stem output: every block once (loop 0 with its first NLL), i.e. the deep branch with the later loops
skipped. **Placeholder choices** (the paper leaves them open; docs/sret.md): with ``mixed_depth_fusion=
"sum_losses"`` (default) training returns :class:`MixedDepthLogits` ``(deep, shallow)`` from the one shared
head and the loss is summed over the branches (``harness.tasks.losses`` does that); evaluation returns the deep
branch. With ``"mean_features"`` the two pooled features are averaged before the head, in training and
evaluation.

Also here: :class:`RecursiveVisionTransformer` (Table 1's naive recursion of DeiT-Tiny, internal/external loops,
SReT-108 with mixed depth) and :class:`RecursiveMlpMixer` (recursive Mixer-B/16 ± LRC, Fig. 7(1)).
"""

import warnings
from collections.abc import Sequence
from functools import partial
from typing import List, NamedTuple, Optional, Tuple, Union

import torch
import torch.nn.functional as F
import torch.utils.checkpoint
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_eval

from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
from timm.layers import LayerScale, Mlp, get_device_dtype, trunc_normal_
from timm.layers.attention import Attention
from timm.models import build_model_with_cfg, generate_default_cfgs, register_model
from timm.models._features import feature_take_indices
from timm.models.mlp_mixer import MixerBlock, MlpMixer
from timm.models.vision_transformer import Block, VisionTransformer

__all__ = [
    "SlicedRecursiveTransformer",
    "RecursiveVisionTransformer",
    "RecursiveMlpMixer",
    "SlicedGroupAttention",
    "LRCBlock",
    "NonLinearProjection",
    "LearnableCoefficient",
    "MixedDepthLogits",
    "lrc_coefficients",
    "LRC_LABELS",
    "checkpoint_filter_fn",
    "fuse_lrc_for_inference",
    "use_inference_linears",
    "InferenceLinear",
    "FoldedResidual",
]

LRC_DESIGNS = ("both", "identity", "branch", "none")
PERMUTATION_DESIGNS = ("P+I-L", "P+I", "P", "none")
EVAL_PERMUTATIONS = ("fixed", "random", "identity")
FUSIONS = ("sum_losses", "mean_features")

# Greek labels by role, following Sec. 5.7 / App. K (α, γ, ζ on the identity). Eq. 9-10 put α, γ, ζ on the
# main branches instead: the paper contradicts itself, so logs use the roles and plots use these labels.
LRC_LABELS = {"attn_id": "α", "attn_res": "β", "ffn_id": "γ", "ffn_res": "δ", "nll_id": "ζ", "nll_res": "θ"}


def _choice(name: str, value, allowed) -> None:
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is not supported; use one of {', '.join(map(repr, allowed))}")


# ----------------------------------------------------------------------------------------------- building blocks


class LearnableCoefficient(nn.Module):
    """One learnable scalar scaling a residual branch (LRC, Eq. 9-10); init 1, unconstrained.

    The parameter is called ``bias`` because the official checkpoints call it so.
    """

    def __init__(self, init: float = 1.0, device=None, dtype=None):
        super().__init__()
        self.bias = nn.Parameter(torch.full((1,), float(init), device=device, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.bias


def _coefficients(lrc: str, device=None, dtype=None) -> tuple[nn.Module, nn.Module]:
    """(identity-branch, function-branch) scalers for one residual connection under LRC design ``lrc``."""
    _choice("lrc", lrc, LRC_DESIGNS)
    on_identity, on_branch = lrc in ("both", "identity"), lrc in ("both", "branch")
    dd = {"device": device, "dtype": dtype}
    return (
        LearnableCoefficient(**dd) if on_identity else nn.Identity(),
        LearnableCoefficient(**dd) if on_branch else nn.Identity(),
    )


class FoldedResidual(nn.Module):
    """``c·x + branch`` in one pass: a residual connection of a model fused for inference
    (:func:`fuse_lrc_for_inference`), whose branch coefficient is already in the branch's last linear layer.

    ``c`` is the connection's identity coefficient — the same Parameter, kept under ``bias`` — or 1 when the LRC
    design has none. The sum is formed by one ``addcmul`` (one read of each operand, one write) instead of a
    multiply per coefficient and an add; it equals ``c·x + branch`` up to rounding (one fused multiply-add).
    """

    def __init__(self, coefficient: nn.Module):
        super().__init__()
        self.bias = coefficient.bias if isinstance(coefficient, LearnableCoefficient) else None

    def forward(self, x: torch.Tensor, branch: torch.Tensor) -> torch.Tensor:
        if self.bias is None:
            return x + branch
        return torch.addcmul(branch, x, self.bias)


def inverse_permutation(perm: torch.Tensor) -> torch.Tensor:
    return torch.argsort(perm)


class SlicedGroupAttention(Attention):
    """Multi-head self-attention inside ``groups`` equal slices of the token sequence (Algorithm 1).

    ``perm`` (optional) reorders the tokens before slicing; with ``inverse=True`` the output is put back in the
    input order *before* the output projection. ``groups=1, perm=None`` is timm's plain ``Attention``; the
    parameters are the same for any group count.
    """

    def forward(
        self, x: torch.Tensor, groups: int = 1, perm: Optional[torch.Tensor] = None, inverse: bool = True
    ) -> torch.Tensor:
        B, N, C = x.shape
        torch._assert(
            N % groups == 0,
            "cannot slice the tokens into equal groups; use a group count that divides "
            "the token count (784/196/49 at 224², 2304/576/144 at 384²)",
        )
        if perm is not None:
            x = x[:, perm]
        n = N // groups
        # contiguous chunks of the (permuted) sequence form the groups; groups are folded into the batch
        qkv = self.qkv(x).reshape(B * groups, n, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        q, k = self.q_norm(q), self.k_norm(k)
        if self.fused_attn:
            x = F.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_drop.p if self.training else 0.0)
        else:
            attn = (q * self.scale) @ k.transpose(-2, -1)
            attn = self.attn_drop(attn.softmax(dim=-1))
            x = attn @ v
        x = x.transpose(1, 2).reshape(B, N, self.attn_dim)
        if perm is not None and inverse:
            x = x[:, inverse_permutation(perm)]
        x = self.norm(x)
        return self.proj_drop(self.proj(x))


class LRCBlock(Block):
    """timm's pre-LN transformer block with learnable residual coefficients (Eq. 9).

    ``x = c1·x + c2·DropPath(attn(LN(x)))``, ``x = c3·x + c4·DropPath(mlp(LN(x)))`` (the official order: drop-path
    inside the branch, before the coefficient). ``forward`` has timm's ``Block`` signature (the recursive DeiT uses
    timm's ``Attention``); :class:`SlicedLRCBlock` is the SReT block with the group count and permutation.
    """

    lrc_roles = {
        "coefficient1": "attn_id",
        "coefficient2": "attn_res",
        "coefficient3": "ffn_id",
        "coefficient4": "ffn_res",
    }

    def __init__(self, dim: int, num_heads: int, *args, lrc: str = "both", **kwargs):
        super().__init__(dim, num_heads, *args, **kwargs)
        dd = {"device": kwargs.get("device"), "dtype": kwargs.get("dtype")}
        self.coefficient1, self.coefficient2 = _coefficients(lrc, **dd)
        self.coefficient3, self.coefficient4 = _coefficients(lrc, **dd)

    def forward(
        self, x: torch.Tensor, attn_mask: Optional[torch.Tensor] = None, is_causal: bool = False
    ) -> torch.Tensor:
        return self._residuals(x, self.attn(self.norm1(x), attn_mask=attn_mask, is_causal=is_causal))

    def _residuals(self, x: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
        """The two coefficient-weighted residual sums around the attention output ``attn`` and the MLP."""
        if hasattr(self, "residual1"):  # fused for inference (static for TorchScript): see fuse_lrc_for_inference
            x = self.residual1(x, attn)
            return self.residual2(x, self.mlp(self.norm2(x)))
        else:
            x = self.coefficient1(x) + self.coefficient2(self.drop_path1(self.ls1(attn)))
            return self.coefficient3(x) + self.coefficient4(self.drop_path2(self.ls2(self.mlp(self.norm2(x)))))


class SlicedLRCBlock(LRCBlock):
    """The SReT block: :class:`LRCBlock` around :class:`SlicedGroupAttention`; ``forward`` takes the application's
    group count, token permutation and whether to undo it (typed arguments, so TorchScript compiles it)."""

    def __init__(self, dim: int, num_heads: int, *args, **kwargs):
        super().__init__(dim, num_heads, *args, attn_layer=SlicedGroupAttention, **kwargs)

    def forward(
        self, x: torch.Tensor, groups: int = 1, perm: Optional[torch.Tensor] = None, inverse: bool = True
    ) -> torch.Tensor:
        return self._residuals(x, self.attn(self.norm1(x), groups=groups, perm=perm, inverse=inverse))


class NonLinearProjection(nn.Module):
    """NLL (Eq. 5, 10): ``c1·x + c2·MLP(LN(x))``, hidden ``int(dim·ratio)``, no drop-path. Official ``Non_proj``."""

    lrc_roles = {"coefficient1": "nll_id", "coefficient2": "nll_res"}

    def __init__(
        self,
        dim: int,
        ratio: float = 1.0,
        lrc: str = "both",
        drop: float = 0.0,
        norm_layer=partial(nn.LayerNorm, eps=1e-6),
        act_layer=nn.GELU,
        device=None,
        dtype=None,
    ):
        super().__init__()
        dd = {"device": device, "dtype": dtype}
        self.norm1 = norm_layer(dim, **dd)
        self.mlp = Mlp(dim, int(dim * ratio), act_layer=act_layer, drop=drop, **dd)
        self.coefficient1, self.coefficient2 = _coefficients(lrc, **dd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if hasattr(self, "residual1"):  # fused for inference (static for TorchScript): see fuse_lrc_for_inference
            return self.residual1(x, self.mlp(self.norm1(x)))
        else:
            return self.coefficient1(x) + self.coefficient2(self.mlp(self.norm1(x)))


class MixedDepthLogits(NamedTuple):
    """Training output of a mixed-depth model: logits of the deep and the shallow branch (one shared head)."""

    deep: torch.Tensor
    shallow: torch.Tensor


def lrc_coefficients(model: nn.Module) -> dict[str, dict[str, float]]:
    """Current LRC values of every module that has them, by role: ``{module name: {role: value}}``.

    Roles are ``attn_id, attn_res, ffn_id, ffn_res`` (blocks) and ``nll_id, nll_res`` (NLLs); ``LRC_LABELS``
    maps them to the paper's Greek letters. A block shared by several loops appears once, under its first name
    (e.g. ``transformers.0.blocks.0``). Call it on a model with real weights (not on the meta device).
    """
    values = {}
    for name, module in model.named_modules():  # named_modules() visits a shared module once
        roles = getattr(module, "lrc_roles", None)
        if not roles:
            continue
        found = {
            role: float(getattr(module, attr).bias.detach().float().cpu())
            for attr, role in roles.items()
            if isinstance(getattr(module, attr, None), LearnableCoefficient)
        }
        if found:
            values[name] = found
    return values


# ------------------------------------------------------------------------------------- inference fusion (LRC)


def _branch_scale(coefficient: nn.Module, layer_scale: Optional[nn.Module]) -> Optional[torch.Tensor]:
    """The factor a residual branch is multiplied by after its last linear layer (coefficient × LayerScale)."""
    scale = coefficient.bias.detach() if isinstance(coefficient, LearnableCoefficient) else None
    if isinstance(layer_scale, LayerScale):
        gamma = layer_scale.gamma.detach()
        scale = gamma if scale is None else gamma * scale
    elif layer_scale is not None and not isinstance(layer_scale, nn.Identity):
        raise TypeError(f"cannot fold a {type(layer_scale).__name__} into a linear layer; only LayerScale")
    return scale


def _fold_into_linear(linear: nn.Module, scale: Optional[torch.Tensor]) -> None:
    """``scale·linear(x)`` = ``linear'(x)`` with the output rows of the weight and the bias scaled."""
    if scale is None:
        return
    if not isinstance(linear, nn.Linear):
        raise TypeError(f"a residual branch must end in nn.Linear to fold its coefficient, not {type(linear).__name__}")
    with torch.no_grad():
        linear.weight.mul_(scale.view(-1, 1) if scale.numel() > 1 else scale)
        if linear.bias is not None:
            linear.bias.mul_(scale)


def _residual_layout(module: nn.Module):
    """Per residual connection of an LRC module: (identity coefficient, branch coefficient, LayerScale or None,
    the branch's last linear layer); None for other modules."""
    if isinstance(module, LRCBlock):
        return (
            ("coefficient1", "coefficient2", "ls1", "attn.proj"),
            ("coefficient3", "coefficient4", "ls2", "mlp.fc2"),
        )
    if isinstance(module, NonLinearProjection):
        return (("coefficient1", "coefficient2", None, "mlp.fc2"),)
    if isinstance(module, LRCMixerBlock):
        return (
            ("coefficient1", "coefficient2", None, "mlp_tokens.fc2"),
            ("coefficient3", "coefficient4", None, "mlp_channels.fc2"),
        )
    return None


def fuse_lrc_for_inference(model: nn.Module) -> nn.Module:
    """Fold the learnable residual coefficients of every LRC block, NLL and Mixer block of ``model``, in place.

    A connection ``c1·x + c2·DropPath(LayerScale(g(LN(x))))`` whose branch ends in a linear layer ``W, b``
    becomes ``c1·x + g'(LN(x))`` with ``W' = c2·γ·W``, ``b' = c2·γ·b`` (exact up to rounding), and the remaining
    ``c1·x + ·`` is one ``addcmul`` (:class:`FoldedResidual`). The identity coefficient ``c1`` is *not* folded
    further: pushing it down the residual stream (``x = c1·x̃``) would need LayerNorm's ``eps`` rescaled by
    ``1/c1²`` at the next connection and a different factor for each loop of a shared block — whose weights are
    one tensor for all its loops — so it stays one multiply-add with the sum the connection needs anyway.
    Drop paths are dropped (identity at evaluation). The coefficients leave the state dict (``c1`` moves to
    ``residualN.bias``); the model can no longer be trained as SReT. Modules visited once even when shared.
    """
    for module in model.modules():  # a block shared by several loops is one module, visited once
        layout = _residual_layout(module)
        if layout is None or hasattr(module, "residual1"):
            continue
        for i, (identity, branch, layer_scale, linear) in enumerate(layout, 1):
            ls = getattr(module, layer_scale) if layer_scale else None
            _fold_into_linear(module.get_submodule(linear), _branch_scale(getattr(module, branch), ls))
            setattr(module, f"residual{i}", FoldedResidual(getattr(module, identity)))
            delattr(module, identity)
            delattr(module, branch)
            if layer_scale:
                setattr(module, layer_scale, nn.Identity())
    return model


def _onednn_linear_available() -> bool:
    try:
        return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")
    except (AttributeError, RuntimeError):
        return False


class InferenceLinear(nn.Linear):
    """A linear layer for inference (the same Parameters as the ``nn.Linear`` it replaces), optionally with the
    GELU that follows it, that runs oneDNN's matmul with the bias and the GELU fused into it
    (``torch.ops.mkldnn._linear_pointwise``, the op torch.compile's CPU backend uses) for CPU fp32/bf16 tensors
    without autograd, and ``F.linear`` (+ ``F.gelu``) otherwise.

    Why: at SReT's shapes (126-756 channels, 12k-50k tokens at batch 64) oneDNN's matmul ran 1.2-2x faster than
    the MKL GEMM behind ``F.linear`` on this work's AMD EPYC CPU (docs/benchmarks.md), and the fused GELU saves a
    pass over the MLP's widest map. Same function up to float rounding.
    """

    def __init__(self, linear: nn.Linear, gelu: Optional[str] = None):
        nn.Module.__init__(self)  # not nn.Linear.__init__: the weights are the given Parameters
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight, self.bias = linear.weight, linear.bias
        self.gelu = gelu  # None, or nn.GELU's ``approximate`` ("none" / "tanh")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if (
            x.device.type == "cpu"
            and x.dtype in (torch.float32, torch.bfloat16)
            and x.dtype == self.weight.dtype
            and not (torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad))
            and _onednn_linear_available()
        ):
            attr, algorithm = ("gelu", self.gelu) if self.gelu is not None else ("none", "")
            return torch.ops.mkldnn._linear_pointwise(x.contiguous(), self.weight, self.bias, attr, [], algorithm)
        x = F.linear(x, self.weight, self.bias)
        return x if self.gelu is None else F.gelu(x, approximate=self.gelu)

    def extra_repr(self) -> str:
        return super().extra_repr() + (f", gelu={self.gelu!r}" if self.gelu is not None else "")


def use_inference_linears(model: nn.Module) -> nn.Module:
    """Replace every ``nn.Linear`` of ``model`` by an :class:`InferenceLinear` on the same Parameters, folding an
    MLP's GELU (timm ``Mlp`` with ``nn.GELU``) into its ``fc1``; in place, returns the model. Inference only."""
    for module in list(model.modules()):
        if isinstance(module, Mlp) and type(module.act) is nn.GELU and type(module.fc1) is nn.Linear:
            module.fc1 = InferenceLinear(module.fc1, gelu=module.act.approximate)
            module.act = nn.Identity()
        for name, child in list(module.named_children()):
            if type(child) is nn.Linear:
                setattr(module, name, InferenceLinear(child))
    return model


class _InferenceFusion:
    """``fuse_for_inference()`` of the recursive models, and the refusal to train a fused one (mixed into the
    model classes before ``nn.Module``)."""

    def fuse_for_inference(self):
        """Fold what evaluation does not need separately into adjacent layers, for faster inference; returns the
        model, in eval mode. Idempotent. The outputs equal the unfused model's up to float rounding (fp32:
        ~1e-6 relative; the tests compare in float64 and fp32).

        - The residual coefficients go into the branches' last linear layers, the identity coefficient into the
          residual sum (:func:`fuse_lrc_for_inference`);
        - the linear layers run oneDNN's matmul with bias and GELU fused on CPU (:func:`use_inference_linears`);
        - SReT's stem: BatchNorms folded into the convolutions, channels-last (:meth:`ConvStem.fuse_for_inference`).

        A fused model refuses ``train()``: rebuild the model and load its (unfused) weights to train or fine-tune.
        Its state dict is not an SReT checkpoint (coefficients folded in; save the unfused model's). TorchScript
        and torch.fx are for the unfused model."""
        if not getattr(self, "fused_for_inference", False):
            self.eval()
            self._fuse_for_inference()
            use_inference_linears(self)
            self.fused_for_inference = True
        return self.eval()

    def _fuse_for_inference(self) -> None:
        fuse_lrc_for_inference(self)

    def train(self, mode: bool = True):
        if mode and getattr(self, "fused_for_inference", False):
            raise RuntimeError(
                f"this {type(self).__name__} was fused for inference (fuse_for_inference()): its "
                "residual coefficients are folded into its linear layers and it cannot be trained; "
                "build the model again and load the unfused weights to train it"
            )
        return super().train(mode)


class ConvStem(nn.Module):
    """Three [conv3×3/s2 → BN → ReLU] (stride 8, DSOD-style). Official ``conv_embedding`` keys."""

    def __init__(self, in_chans: int, channels: Sequence[int], device=None, dtype=None):
        super().__init__()
        dd = {"device": device, "dtype": dtype}
        c1, c2, c3 = channels
        self.conv1, self.bn1 = nn.Conv2d(in_chans, c1, 3, 2, 1, **dd), nn.BatchNorm2d(c1, **dd)
        self.conv2, self.bn2 = nn.Conv2d(c1, c2, 3, 2, 1, **dd), nn.BatchNorm2d(c2, **dd)
        self.conv3, self.bn3 = nn.Conv2d(c2, c3, 3, 2, 1, **dd), nn.BatchNorm2d(c3, **dd)
        self.channels_last = False  # set by fuse_for_inference

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        # in place: ReLU's input is a BatchNorm output, which BatchNorm's backward does not need (as in ResNet)
        x = F.relu(self.bn1(self.conv1(x)), inplace=True)
        x = F.relu(self.bn2(self.conv2(x)), inplace=True)
        return F.relu(self.bn3(self.conv3(x)), inplace=True)

    def fuse_for_inference(self) -> None:
        """Fold each (eval-mode) BatchNorm into the convolution before it, and run channels-last (oneDNN's direct
        NHWC convolutions: ~1.5x faster for these shapes on CPU, and the stages' token views are then dense)."""
        for i in (1, 2, 3):
            bn = getattr(self, f"bn{i}")
            if isinstance(bn, nn.BatchNorm2d):
                setattr(self, f"conv{i}", fuse_conv_bn_eval(getattr(self, f"conv{i}").eval(), bn.eval()))
                setattr(self, f"bn{i}", nn.Identity())
        self.channels_last = True

    @staticmethod
    def out_size(size: int) -> int:
        for _ in range(3):
            size = (size - 1) // 2 + 1
        return size


class PatchStem(nn.Module):
    """PiT's patch embedding (one conv, kernel 16, stride 8) — Table 3's rows without the stem [assumption]."""

    def __init__(self, in_chans: int, dim: int, patch_size: int = 16, stride: int = 8, device=None, dtype=None):
        super().__init__()
        self.patch_size, self.stride = patch_size, stride
        self.conv = nn.Conv2d(in_chans, dim, patch_size, stride, device=device, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)

    def out_size(self, size: int) -> int:
        return (size - self.patch_size) // self.stride + 1


class ConvPooling(nn.Module):
    """Depthwise-style 3×3/s2 conv, C → 2C (official ``conv_head_pooling``); ``fc`` maps a class token if any."""

    def __init__(self, dim: int, out_dim: int, class_token: bool = False, device=None, dtype=None):
        super().__init__()
        self.conv = nn.Conv2d(dim, out_dim, 3, 2, 1, groups=dim, device=device, dtype=dtype)
        self.fc = nn.Linear(dim, out_dim, device=device, dtype=dtype) if class_token else None

    def forward(
        self, x: torch.Tensor, cls: Optional[torch.Tensor] = None
    ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        if self.fc is not None and cls is not None:
            cls = self.fc(cls)
        return self.conv(x), cls

    @staticmethod
    def out_size(size: int) -> int:
        return (size - 1) // 2 + 1


class RecursiveStage(nn.Module):
    """A stage of distinct recursive blocks (official ``Transformer``), on the stage's B×C×H×W map.

    ``blocks`` is the official interleaved ModuleList ``[B0, N0, B0, N1, B1, N2, B1, N3, …]``: each distinct block
    appears once per loop (the same module object), each followed by its own NLL. ``state_dict()`` therefore
    holds one copy of a block's tensors per loop, as the official checkpoints do; ``parameters()`` yields them
    once. ``forward`` walks ``blocks`` slot by slot (a loop TorchScript unrolls); what each block application
    needs — its loop, group count and permutation — is kept per slot in typed lists, fixed at construction.

    Permutations (module docstring of :mod:`models.sret`): a block application in loop ≥ 1 permutes its tokens
    when the design says so (``permutes(loop, groups)``); training (and ``eval_permutation="random"``) draws a
    fresh one right before the application, evaluation uses row ``slot_perm[i]`` of ``fixed_perms``, drawn here
    from a CPU generator seeded with ``permutation_seed + application index`` (the index counts every block
    application of the model, from ``first_application``). The token count is fixed by ``img_size``, so the
    permutations are drawn for the static ``length`` (FX tracing never needs the input's size).
    """

    def __init__(
        self,
        dim: int,
        num_blocks: int,
        loops: int,
        num_heads: int,
        mlp_ratio: float,
        nll_ratio: float,
        drop_path: Sequence[float],
        lrc: str,
        nll: bool,
        groups: Sequence[int] = (1,),
        length: int = 1,
        permutes=None,
        inverse: bool = True,
        first_application: int = 0,
        permutation_seed: int = 0,
        attn_drop: float = 0.0,
        proj_drop: float = 0.0,
        norm_layer=partial(nn.LayerNorm, eps=1e-6),
        device=None,
        dtype=None,
    ):
        super().__init__()
        dd = {"device": device, "dtype": dtype}
        self.num_blocks, self.loops, self.length, self.inverse = num_blocks, loops, length, inverse
        self.channels_last = False  # channels-last output maps: set by the model's fuse_for_inference
        modules, self.slot_loop, self.slot_groups, self.slot_perm = [], [], [], []
        perms = []
        application = first_application
        for j in range(num_blocks):
            block = SlicedLRCBlock(
                dim,
                num_heads,
                lrc=lrc,
                mlp_ratio=mlp_ratio,
                qkv_bias=True,
                proj_drop=proj_drop,
                attn_drop=attn_drop,
                drop_path=drop_path[j],
                norm_layer=norm_layer,
                **dd,
            )
            for loop in range(loops):
                g = groups[min(loop, len(groups) - 1)]
                row = -1
                if permutes is not None and permutes(loop, g):
                    generator = torch.Generator(device="cpu").manual_seed(permutation_seed + application)
                    row = len(perms)
                    perms.append(torch.randperm(length, generator=generator, device="cpu"))
                modules.append(block)
                self.slot_loop.append(loop)
                self.slot_groups.append(g)
                self.slot_perm.append(row)
                if nll:
                    modules.append(
                        NonLinearProjection(dim, nll_ratio, lrc=lrc, drop=proj_drop, norm_layer=norm_layer, **dd)
                    )
                    self.slot_loop.append(loop)  # an NLL runs (and is skipped) with its block application
                    self.slot_groups.append(1)
                    self.slot_perm.append(-1)
                application += 1
        self.num_applications = application - first_application
        self.blocks = nn.ModuleList(modules)
        fixed = torch.stack(perms) if perms else torch.zeros(0, length, dtype=torch.long)
        # non-persistent: follows .to(), never in the state dict (the official checkpoints have no such entry)
        self.register_buffer("fixed_perms", fixed.to(device=device), persistent=False)

    def _permutation(self, slot: int, eval_permutation: str, device: torch.device) -> Optional[torch.Tensor]:
        """The token permutation of the block application at ``slot`` (None: contiguous groups)."""
        row = self.slot_perm[slot]
        if row < 0:
            return None
        if self.training or eval_permutation == "random":
            return torch.randperm(self.length, device=device)
        if eval_permutation == "identity":
            return None
        return self.fixed_perms[row]

    def forward(
        self,
        x: torch.Tensor,
        cls: Optional[torch.Tensor] = None,
        eval_permutation: str = "fixed",
        max_loops: Optional[int] = None,
    ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """Run the stage's block applications in order on the map ``x`` (and the class token ``cls``, put first).

        ``max_loops`` skips the later loops (mixed depth's shallow branch). Returns the map and the class token.
        """
        B, C, H, W = x.shape
        # the blocks get token-major (B, N, C) memory: the token view of an NCHW map is channels-first, and the
        # residual stream would stay so through every add, each LayerNorm copying it (3 copies per block
        # application); one copy here instead. A fused model's maps are channels-last: token-major already, and the
        # stage returns them so (a module flag, not a test of x's strides, so torch.fx can trace the stage)
        channels_last = self.channels_last
        tokens = x.flatten(2).transpose(1, 2)
        if cls is not None:
            tokens = torch.cat([cls, tokens], dim=1)
        else:
            tokens = tokens.contiguous()
        for i, module in enumerate(self.blocks):
            if max_loops is None or self.slot_loop[i] < max_loops:
                # blocks have an attention, NLLs not; TorchScript decides hasattr per unrolled module (it cannot
                # narrow a module with isinstance), so each slot compiles only its own call
                if hasattr(module, "attn"):
                    perm = self._permutation(i, eval_permutation, tokens.device)
                    tokens = module(tokens, self.slot_groups[i], perm, self.inverse)
                else:
                    tokens = module(tokens)
        if cls is not None:
            cls, tokens = tokens[:, :1], tokens[:, 1:]
        elif channels_last:
            return tokens.reshape(B, H, W, C).permute(0, 3, 1, 2), cls  # the channels-last map, no copy
        return tokens.transpose(1, 2).reshape(B, C, H, W), cls


# ------------------------------------------------------------------------------------------------------ the model


class SlicedRecursiveTransformer(_InferenceFusion, nn.Module):
    """SReT: spatial-pyramid recursive transformer with LRC, NLLs and sliced group self-attention.

    Args (defaults = SReT-T; [code] = taken from the official code, [assumption] = our choice where the paper is
    silent, docs/sret.md):
        img_size: input side; the positional embedding is fixed to it (``img_size/8`` squared), as officially.
        base_dims, heads: per-stage head dim and head count; stage width = ``base_dims[s]·heads[s]``.
        num_blocks: distinct blocks per stage (official ``recursive_num``), default (2, 5, 3).
        loops: applications of each block (recursion count N, default 2; Table 1/Theorem 1).
        groups: per stage, the group count of each loop, e.g. ``((8, 2), (4, 1), (1, 1))`` (the final design);
            a stage's last entry repeats for further loops [assumption]. ``groups1``/``groups2`` (official
            spelling: loop-0 and later-loop counts per stage) override it.
        mlp_ratio, nll_ratio: FFN and NLL hidden ratios (hidden = ``int(dim·ratio)`` [code]).
        drop_path_rate: stochastic depth; ``drop_path_schedule="official"`` gives distinct block j of stage s the
            rate ``rate·(start_s + j)/total`` with ``start_s`` the applications before the stage [code quirk,
            docs/sret.md]; ``"linear"`` ramps linearly over the distinct blocks [assumption, the alternative].
        lrc: LRC design (Table 11): ``both`` (SReT), ``identity``, ``branch``, ``none``.
        nll: with NLLs (True, SReT) or without.
        stem: ``"conv"`` (SReT) or ``"patch"`` (Table 3 w/o stem [assumption: PiT conv16/s8]);
            ``stem_channels`` overrides the conv stem's (C0/2, C0, C0) [code].
        class_token: PiT-style class token (Table 3 ablation [assumption]); needs all groups 1.
        permutation: Table 5 design — ``"P+I-L"`` (SReT: permute + inverse in loops ≥ 1 when G > 1), ``"P+I"``
            (also when G = 1), ``"P"`` (no inverse), ``"none"`` (contiguous groups in every loop).
        eval_permutation: ``"fixed"`` (default, deterministic), ``"random"`` (official), ``"identity"``.
        permutation_seed: seed of the fixed evaluation permutations.
        mixed_depth, mixed_depth_fusion: mixed-depth training (see module docstring; placeholder choices).
        distill_head: add a DeiT-style second head ``head_dist`` on the pooled feature (training returns
            ``(head, head_dist)``, evaluation their mean). Off in every registered variant: SReT removes the
            distillation token (App. E) and the official ``*_distill`` checkpoints have one head.
    """

    __jit_unused_properties__ = ["unsliced_twin_kwargs"]  # a helper for building models, not for TorchScript

    def __init__(
        self,
        img_size: int = 224,
        in_chans: int = 3,
        num_classes: int = 1000,
        base_dims: Sequence[int] = (32, 32, 32),
        heads: Sequence[int] = (2, 4, 8),
        num_blocks: Sequence[int] = (2, 5, 3),
        loops: int = 2,
        groups: Sequence[Sequence[int]] = ((8, 2), (4, 1), (1, 1)),
        groups1: Sequence[int] | None = None,
        groups2: Sequence[int] | None = None,
        mlp_ratio: float = 3.6,
        nll_ratio: float = 1.0,
        drop_rate: float = 0.0,
        attn_drop_rate: float = 0.0,
        drop_path_rate: float = 0.1,
        drop_path_schedule: str = "official",
        lrc: str = "both",
        nll: bool = True,
        stem: str = "conv",
        stem_channels: Sequence[int] | None = None,
        patch_size: int = 16,
        patch_stride: int = 8,
        class_token: bool = False,
        permutation: str = "P+I-L",
        eval_permutation: str = "fixed",
        permutation_seed: int = 0,
        mixed_depth: bool = False,
        mixed_depth_fusion: str = "sum_losses",
        distill_head: bool = False,
        global_pool: str | None = None,
        device=None,
        dtype=None,
    ):
        super().__init__()
        dd = {"device": device, "dtype": dtype}
        if not isinstance(img_size, int):  # timm's factory passes (H, W) for fixed-size models
            if len(img_size) != 2 or img_size[0] != img_size[1]:
                raise ValueError(f"img_size={img_size}: SReT's positional embedding is square; give one side")
            img_size = int(img_size[0])
        if global_pool is None:
            global_pool = "token" if class_token else "avg"
        _choice("global_pool", global_pool, ("avg", "token", ""))
        for name, value, allowed in (
            ("permutation", permutation, PERMUTATION_DESIGNS),
            ("eval_permutation", eval_permutation, EVAL_PERMUTATIONS),
            ("mixed_depth_fusion", mixed_depth_fusion, FUSIONS),
            ("drop_path_schedule", drop_path_schedule, ("official", "linear")),
            ("stem", stem, ("conv", "patch")),
            ("lrc", lrc, LRC_DESIGNS),
        ):
            _choice(name, value, allowed)
        num_stages = len(num_blocks)
        if not (len(base_dims) == len(heads) == num_stages):
            raise ValueError(
                f"base_dims, heads and num_blocks need one entry per stage; got "
                f"{len(base_dims)}, {len(heads)}, {len(num_blocks)}"
            )
        if loops < 1:
            raise ValueError(f"loops={loops}: each block must run at least once")
        if groups1 is not None or groups2 is not None:
            g1 = list(groups1 if groups1 is not None else [g[0] for g in groups])
            g2 = list(groups2 if groups2 is not None else [g[-1] for g in groups])
            groups = tuple((a, b) for a, b in zip(g1, g2))
        groups = tuple(tuple(int(g) for g in (s if isinstance(s, Sequence) else (s,))) for s in groups)
        if len(groups) != num_stages or any(len(s) == 0 or min(s) < 1 for s in groups):
            raise ValueError(
                f"groups={groups}: give one non-empty tuple of positive group counts per stage "
                f"({num_stages} stages), e.g. ((8, 2), (4, 1), (1, 1))"
            )
        if mixed_depth and distill_head:
            raise ValueError("mixed_depth and distill_head cannot be combined; enable one of them")
        if class_token and any(g > 1 for s in groups for g in s):
            raise ValueError(
                f"class_token=True needs groups of 1 everywhere (got {groups}): "
                "a class token makes the token count indivisible"
            )

        self.num_classes, self.global_pool, self.in_chans = num_classes, global_pool, in_chans
        self.img_size, self.loops, self.groups = img_size, loops, groups
        self.permutation, self.eval_permutation, self.permutation_seed = permutation, eval_permutation, permutation_seed
        self.mixed_depth, self.mixed_depth_fusion = mixed_depth, mixed_depth_fusion
        self.has_class_token = class_token
        dims = [b * h for b, h in zip(base_dims, heads)]
        self.dims = dims
        self.num_features = self.head_hidden_size = dims[-1]

        if stem == "conv":
            self.patch_embed = ConvStem(in_chans, stem_channels or (dims[0] // 2, dims[0], dims[0]), **dd)
            grid = ConvStem.out_size(img_size)
            stem_out = (stem_channels or (0, 0, dims[0]))[-1]
        else:
            self.patch_embed = PatchStem(in_chans, dims[0], patch_size, patch_stride, **dd)
            grid = self.patch_embed.out_size(img_size)
            stem_out = dims[0]
        if stem_out != dims[0]:
            raise ValueError(
                f"the stem ends with {stem_out} channels but stage 1 is {dims[0]} wide; "
                f"make stem_channels[-1] == base_dims[0]*heads[0]"
            )
        self.pos_embed = nn.Parameter(torch.zeros(1, dims[0], grid, grid, **dd))
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dims[0], **dd)) if class_token else None
        self.pos_drop = nn.Dropout(drop_rate)

        total = sum(num_blocks) * loops
        starts = [sum(num_blocks[:s]) * loops for s in range(num_stages)]
        if drop_path_schedule == "official":
            rates = [
                [drop_path_rate * (starts[s] + j) / total for j in range(num_blocks[s])] for s in range(num_stages)
            ]
        else:
            ramp = torch.linspace(0, drop_path_rate, sum(num_blocks), device="cpu").tolist()
            rates = [ramp[sum(num_blocks[:s]) : sum(num_blocks[: s + 1])] for s in range(num_stages)]
        self.grid_sizes, self.feature_info = [], []
        transformers, pools = [], []
        application = 0
        for s in range(num_stages):
            self.grid_sizes.append(grid)
            tokens = grid * grid
            bad = [g for g in groups[s] if tokens % g]
            if bad:
                raise ValueError(
                    f"stage {s + 1} has {tokens} tokens at img_size={img_size}, not divisible by "
                    f"group count(s) {bad}; choose groups that divide it"
                )
            # the fixed evaluation permutations (module docstring) are drawn by the stages, for the static token
            # count (img_size is fixed), seeded per block application of the whole model
            stage = RecursiveStage(
                dims[s],
                num_blocks[s],
                loops,
                heads[s],
                mlp_ratio,
                nll_ratio,
                rates[s],
                lrc,
                nll,
                groups=groups[s],
                length=tokens + int(class_token),
                permutes=self._permutes,
                inverse=permutation != "P",
                first_application=application,
                permutation_seed=permutation_seed,
                attn_drop=attn_drop_rate,
                proj_drop=drop_rate,
                **dd,
            )
            application += stage.num_applications
            transformers.append(stage)
            self.feature_info.append(
                dict(
                    num_chs=dims[s],
                    reduction=(8 if stem == "conv" else patch_stride) * 2**s,
                    module=f"transformers.{s}",
                )
            )
            if s < num_stages - 1:
                pools.append(ConvPooling(dims[s], dims[s + 1], class_token, **dd))
                grid = ConvPooling.out_size(grid)
        self.transformers = nn.ModuleList(transformers)
        self.pools = nn.ModuleList(pools)
        self.num_applications = total

        self.norm = nn.LayerNorm(dims[-1], eps=1e-6, **dd)
        self.head = nn.Linear(dims[-1], num_classes, **dd) if num_classes > 0 else nn.Identity()
        self.head_dist = None
        if distill_head:
            self.head_dist = nn.Linear(dims[-1], num_classes, **dd) if num_classes > 0 else nn.Identity()

        trunc_normal_(self.pos_embed, std=0.02)
        if self.cls_token is not None:
            trunc_normal_(self.cls_token, std=0.02)
        # PiT/official init: only LayerNorms are reset; Linear/Conv keep PyTorch's default init [code]
        for m in self.modules():
            if isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    # ---- timm API
    @torch.jit.ignore
    def no_weight_decay(self) -> set[str]:
        return {"pos_embed", "cls_token"}

    @torch.jit.ignore
    def get_classifier(self) -> nn.Module:
        return self.head

    def reset_classifier(self, num_classes: int, global_pool: str | None = None) -> None:
        dd = get_device_dtype(self)
        if global_pool is not None:
            _choice("global_pool", global_pool, ("avg", "token", ""))
            self.global_pool = global_pool
        self.num_classes = num_classes
        self.head = nn.Linear(self.num_features, num_classes, **dd) if num_classes > 0 else nn.Identity()
        self.head.train(self.training)
        if self.head_dist is not None:
            self.head_dist = nn.Linear(self.num_features, num_classes, **dd) if num_classes > 0 else nn.Identity()
            self.head_dist.train(self.training)

    @property
    def unsliced_twin_kwargs(self) -> dict:
        """Constructor kwargs that turn this model into its non-sliced twin (the paper's ``*`` model)."""
        return {"groups": tuple((1,) for _ in self.groups), "groups1": None, "groups2": None}

    def lrc_coefficients(self) -> dict[str, dict[str, float]]:
        """LRC values per module and role (see :func:`lrc_coefficients`)."""
        return lrc_coefficients(self)

    def _fuse_for_inference(self) -> None:
        """``fuse_for_inference()`` (see :class:`_InferenceFusion`): LRC coefficients and the stem's BatchNorms."""
        fuse_lrc_for_inference(self)
        if isinstance(self.patch_embed, ConvStem):
            self.patch_embed.fuse_for_inference()
        for stage in self.transformers:
            stage.channels_last = True

    # ---- permutations
    def _permutes(self, loop: int, groups: int) -> bool:
        """Whether a block application in ``loop`` with ``groups`` groups permutes its tokens (the design)."""
        return not (loop == 0 or self.permutation == "none" or (self.permutation == "P+I-L" and groups == 1))

    # ---- forward
    @torch.jit.ignore
    def _check_input(self, x: torch.Tensor) -> None:
        if isinstance(x, torch.fx.Proxy):
            return  # symbolic tracing: no sizes to check
        if x.shape[-2:] != (self.img_size, self.img_size):
            raise ValueError(
                f"input is {tuple(x.shape[-2:])} but the model was built for img_size={self.img_size}; "
                f"build it with img_size={x.shape[-1]} (checkpoints' pos_embed is resized on load)"
            )

    def _stem(self, x: torch.Tensor) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """Stem + positional embedding: the stage-1 map, and the class token (None without one)."""
        if torch.jit.is_scripting():
            torch._assert(
                x.shape[-2] == self.img_size and x.shape[-1] == self.img_size,
                "the input size differs from the img_size the model was built for",
            )
        else:
            self._check_input(x)
        x = self.pos_drop(self.patch_embed(x) + self.pos_embed)
        cls: Optional[torch.Tensor] = None
        if self.cls_token is not None:
            cls = self.cls_token.expand(x.shape[0], -1, -1)
        return x, cls

    def _features(self, last_map: torch.Tensor, cls: Optional[torch.Tensor]) -> torch.Tensor:
        if cls is None:
            return last_map
        return torch.cat([cls, last_map.flatten(2).transpose(1, 2)], dim=1)  # (B, 1 + H·W, C), class token first

    def forward_stages(self, x: torch.Tensor, max_loops: Optional[int] = None) -> List[torch.Tensor]:
        """Feature maps after each stage (strides 8/16/32), B×C×H×W; ``max_loops`` truncates the recursion."""
        x, cls = self._stem(x)
        maps: List[torch.Tensor] = []
        for stage, pool in zip(self.transformers, self.pools):  # every stage but the last is followed by a pool
            x, cls = stage(x, cls, self.eval_permutation, max_loops)
            maps.append(x)
            x, cls = pool(x, cls)
        x, cls = self.transformers[-1](x, cls, self.eval_permutation, max_loops)
        maps.append(x)
        return maps

    def forward_intermediates(
        self,
        x: torch.Tensor,
        indices: Optional[Union[int, List[int]]] = None,
        norm: bool = False,
        stop_early: bool = False,
        output_fmt: str = "NCHW",
        intermediates_only: bool = False,
    ) -> Union[List[torch.Tensor], Tuple[torch.Tensor, List[torch.Tensor]]]:
        """timm's feature API (``features_only=True`` uses it): the output maps of the stages ``indices`` (timm's
        semantics: None = all, int n = the last n, a list = those) as B×C×H×W, strides 8/16/32. The final
        LayerNorm follows the global pooling (Fig. 2 of the paper), so it applies to no map; ``norm`` is moot.
        Returns ``(forward_features output, maps)``, or only the maps."""
        if output_fmt != "NCHW":
            raise ValueError("output_fmt must be 'NCHW', not " + output_fmt)
        take_indices, max_index = feature_take_indices(len(self.transformers), indices)
        x, cls = self._stem(x)
        if torch.jit.is_scripting() or not (stop_early or intermediates_only):  # TorchScript cannot slice them
            stages = self.transformers
            pools = self.pools
        else:
            stages = self.transformers[: max_index + 1]
            pools = self.pools[:max_index]
        intermediates: List[torch.Tensor] = []
        last = 0
        for i, (stage, pool) in enumerate(zip(stages, pools)):
            x, cls = stage(x, cls, self.eval_permutation, None)
            if i in take_indices:
                intermediates.append(x)
            x, cls = pool(x, cls)
            last = i + 1
        x, cls = stages[-1](x, cls, self.eval_permutation, None)
        if last in take_indices:
            intermediates.append(x)
        if intermediates_only:
            return intermediates
        return self._features(x, cls), intermediates

    def prune_intermediate_layers(
        self, indices: int | list[int] = 1, prune_norm: bool = False, prune_head: bool = True
    ) -> list[int]:
        """Drop the stages after the last of ``indices`` (and the head, and the final norm with ``prune_norm``)."""
        take_indices, max_index = feature_take_indices(len(self.transformers), indices)
        prune_end = max_index < len(self.transformers) - 1
        self.transformers = self.transformers[: max_index + 1]
        self.pools = self.pools[:max_index]
        if prune_end:  # features now end at the last kept stage; norm and head were sized for the final one
            self.num_features = self.head_hidden_size = self.dims[max_index]
        if prune_norm or prune_end:
            self.norm = nn.Identity()
        if prune_head or prune_end:
            self.reset_classifier(0, "")
        return take_indices

    def forward_features(self, x: torch.Tensor, max_loops: Optional[int] = None) -> torch.Tensor:
        """The last stage's map, B×C×H×W (with a class token: the B×(1+H·W)×C tokens, class token first)."""
        x, cls = self._stem(x)
        for stage, pool in zip(self.transformers, self.pools):
            x, cls = stage(x, cls, self.eval_permutation, max_loops)
            x, cls = pool(x, cls)
        x, cls = self.transformers[-1](x, cls, self.eval_permutation, max_loops)
        return self._features(x, cls)

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False):
        """Pool (GAP, or the class token) → LayerNorm → classifier. ``global_pool=''``: the LayerNorm per
        position, no pooling."""
        if self.global_pool == "avg":
            x = self.norm(x.mean(dim=(2, 3)) if self.cls_token is None else x[:, 1:].mean(dim=1))
        elif self.global_pool == "token":
            x = self.norm(x[:, 0])
        else:
            x = self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2) if self.cls_token is None else self.norm(x)
        return x if pre_logits else self._classify(x)

    def _classify(self, x: torch.Tensor):
        if self.head_dist is None:
            return self.head(x)
        logits, dist = self.head(x), self.head_dist(x)
        if self.training and not torch.jit.is_scripting():
            return logits, dist  # separate logits for the distillation loss (timm's DeiT does the same)
        return (logits + dist) / 2

    def forward(self, x: torch.Tensor):
        if not self.mixed_depth:
            return self.forward_head(self.forward_features(x))
        deep = self.forward_head(self.forward_features(x), pre_logits=True)
        if self.mixed_depth_fusion == "mean_features":
            return self._classify(
                (deep + self.forward_head(self.forward_features(x, max_loops=1), pre_logits=True)) / 2
            )
        if self.training and not torch.jit.is_scripting():
            # both branches for the summed loss; a TorchScript module returns one tensor (the deep branch), as
            # timm's distilled DeiT does
            shallow = self.forward_head(self.forward_features(x, max_loops=1), pre_logits=True)
            return MixedDepthLogits(self._classify(deep), self._classify(shallow))
        return self._classify(deep)


# ------------------------------------------------------------------------------------------ checkpoint loading


def _shared_key_groups(model: nn.Module) -> list[list[str]]:
    """State-dict prefixes that name the same module (a shared block's copies), first name first."""
    by_module: dict[int, list[str]] = {}
    for name, module in model.named_modules(remove_duplicate=False):
        if isinstance(module, LRCBlock):
            by_module.setdefault(id(module), []).append(name)
    return [names for names in by_module.values() if len(names) > 1]


def checkpoint_filter_fn(state_dict: dict, model: SlicedRecursiveTransformer) -> dict:
    """Make an official (or our) SReT state dict loadable by ``model`` with ``strict=True``.

    Takes an already unwrapped flat state dict (timm's loaders unwrap ``{'model': …}`` and ``module.``); fills in
    a shared block's missing copies from the copy that is present and refuses copies that disagree (they are one
    tensor in the model); resizes ``pos_embed`` bicubically when the checkpoint was trained at another
    resolution [assumption, docs/sret.md].
    """
    state_dict = dict(state_dict)
    for names in _shared_key_groups(model):
        suffixes = {k[len(n) + 1 :] for n in names for k in state_dict if k.startswith(n + ".")}
        for suffix in suffixes:
            present = [(n, state_dict[f"{n}.{suffix}"]) for n in names if f"{n}.{suffix}" in state_dict]
            ref_name, ref = present[0]
            for other, tensor in present[1:]:
                if tensor.shape != ref.shape or not torch.equal(tensor, ref):
                    raise ValueError(
                        f"checkpoint has different tensors for the shared block copies "
                        f"{ref_name}.{suffix} and {other}.{suffix}; the block's loops must share "
                        "one tensor — fix the checkpoint or load one copy"
                    )
            for n in names:
                state_dict.setdefault(f"{n}.{suffix}", ref)
    pos = state_dict.get("pos_embed")
    target = getattr(model, "pos_embed", None)
    if pos is not None and target is not None and pos.shape != target.shape:
        if pos.ndim != 4 or pos.shape[:2] != target.shape[:2]:
            raise ValueError(
                f"checkpoint pos_embed {tuple(pos.shape)} does not fit the model's "
                f"{tuple(target.shape)}: different width, not just another resolution"
            )
        state_dict["pos_embed"] = F.interpolate(
            pos.float(), size=target.shape[-2:], mode="bicubic", align_corners=False
        ).to(pos.dtype)
    return state_dict


# --------------------------------------------------------------- recursive ViT / Mixer (Table 1, SReT-108, Fig. 7)

with warnings.catch_warnings():  # torch>=2.9 flags all of torch.jit as deprecated; timm still supports it
    warnings.filterwarnings("ignore", message=".*torch.jit.interface.*", category=FutureWarning)

    @torch.jit.interface
    class _TokenModule(nn.Module):
        """What an NLL is to TorchScript (tokens in, tokens out): a ModuleList of them can be indexed at run time."""

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            pass


class RecursiveVisionTransformer(_InferenceFusion, VisionTransformer):
    """timm's ViT with each block applied ``loops`` times (weights shared).

    ``loop_order="internal"`` runs B1,B1,B2,B2,… (SReT); ``"external"`` runs the whole stack ``loops`` times
    (Sec. 3's comparison). ``lrc`` adds learnable residual coefficients, ``nll_ratio`` an NLL after every
    application. Table 1's "+k× naive recursive" is ``loops=k+1, lrc="none"`` without NLL (the default) and keeps
    timm's DeiT state-dict layout. ``mixed_depth`` as in :class:`SlicedRecursiveTransformer` (shallow branch =
    one pass through the blocks).
    """

    def __init__(
        self,
        loops: int = 2,
        loop_order: str = "internal",
        lrc: str = "none",
        nll_ratio: float | None = None,
        mixed_depth: bool = False,
        mixed_depth_fusion: str = "sum_losses",
        **kwargs,
    ):
        _choice("loop_order", loop_order, ("internal", "external"))
        _choice("lrc", lrc, LRC_DESIGNS)
        _choice("mixed_depth_fusion", mixed_depth_fusion, FUSIONS)
        if loops < 1:
            raise ValueError(f"loops={loops}: each block must run at least once")
        if lrc != "none":
            kwargs["block_fn"] = partial(LRCBlock, lrc=lrc)
        super().__init__(**kwargs)
        self.loops, self.loop_order, self.lrc = loops, loop_order, lrc
        self.mixed_depth, self.mixed_depth_fusion = mixed_depth, mixed_depth_fusion
        depth = len(self.blocks)
        self.nlls = None
        if nll_ratio:
            dd = {"device": kwargs.get("device"), "dtype": kwargs.get("dtype")}
            self.nlls = nn.ModuleList(
                NonLinearProjection(self.embed_dim, nll_ratio, lrc=lrc, **dd) for _ in range(depth * loops)
            )

    def _schedule(self, loops: int) -> list[int]:
        depth = len(self.blocks)
        if self.loop_order == "internal":
            return [j for j in range(depth) for _ in range(loops)]
        return [j for _ in range(loops) for j in range(depth)]

    def _nll(self, x: torch.Tensor, application: int) -> torch.Tensor:
        """The NLL after block application ``application`` (none without NLLs)."""
        if self.nlls is not None:
            # a typed interface lets TorchScript index the ModuleList with a run-time index
            nll: _TokenModule = self.nlls[application]
            x = nll.forward(x)
        return x

    def forward_features(self, x: torch.Tensor, max_loops: Optional[int] = None) -> torch.Tensor:
        x = self.norm_pre(self.patch_drop(self._pos_embed(self.patch_embed(x))))
        loops = self.loops
        if max_loops is not None and max_loops != 0:  # None/0: every loop
            loops = min(loops, max_loops)
        application = 0  # counts the applications that run (the NLL index, as in _schedule)
        # the same order as _schedule, written as loops over the blocks (TorchScript unrolls those)
        # grad checkpointing per block application (timm's flag, set by set_grad_checkpointing; checkpoint_seq
        # does not apply: the blocks are not one sequence). The test stays inline: TorchScript drops the branch
        if self.loop_order == "internal":
            for block in self.blocks:
                for _ in range(loops):
                    if self.grad_checkpointing and not torch.jit.is_scripting() and torch.is_grad_enabled():
                        x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
                    else:
                        x = block(x)
                    x = self._nll(x, application)
                    application += 1
        else:
            for _ in range(loops):
                for block in self.blocks:
                    if self.grad_checkpointing and not torch.jit.is_scripting() and torch.is_grad_enabled():
                        x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
                    else:
                        x = block(x)
                    x = self._nll(x, application)
                    application += 1
        return self.norm(x)

    def forward_intermediates(
        self,
        x: torch.Tensor,
        indices: int | list[int] | None = None,
        return_prefix_tokens: bool = False,
        norm: bool = False,
        stop_early: bool = False,
        output_fmt: str = "NCHW",
        intermediates_only: bool = False,
    ):
        """timm's ViT feature API over the recursion: intermediate i is distinct block i's output after its last
        application (and NLL); the final output is ``forward_features``'s."""
        if output_fmt not in ("NCHW", "NLC"):
            raise ValueError(f"output_fmt must be 'NCHW' or 'NLC', not {output_fmt!r}")
        take_indices, max_index = feature_take_indices(len(self.blocks), indices)
        B, _, height, width = x.shape
        x = self.norm_pre(self.patch_drop(self._pos_embed(self.patch_embed(x))))
        schedule = self._schedule(self.loops)
        last_use = {j: a for a, j in enumerate(schedule)}
        stop = last_use[max_index] if stop_early else len(schedule) - 1
        intermediates = []
        for application, j in enumerate(schedule[: stop + 1]):
            x = self.blocks[j](x)
            if self.nlls is not None:
                x = self.nlls[application](x)
            if application == last_use[j] and j in take_indices:
                intermediates.append(self.norm(x) if norm else x)
        prefix = [y[:, : self.num_prefix_tokens] for y in intermediates] if self.num_prefix_tokens else None
        intermediates = [y[:, self.num_prefix_tokens :] for y in intermediates]
        if output_fmt == "NCHW":
            H, W = self.patch_embed.dynamic_feat_size((height, width))
            intermediates = [y.reshape(B, H, W, -1).permute(0, 3, 1, 2).contiguous() for y in intermediates]
        if return_prefix_tokens and prefix is not None:
            intermediates = list(zip(intermediates, prefix))
        return intermediates if intermediates_only else (self.norm(x), intermediates)

    def prune_intermediate_layers(
        self, indices: int | list[int] = 1, prune_norm: bool = False, prune_head: bool = True
    ) -> list[int]:
        if self.loop_order == "external" and self.nlls is not None:
            raise ValueError(
                "pruning an external-loop model with NLLs would re-index its NLLs; prune the "
                "internal-loop model or build a shallower one"
            )
        return super().prune_intermediate_layers(indices, prune_norm=prune_norm, prune_head=prune_head)

    def lrc_coefficients(self) -> dict[str, dict[str, float]]:
        return lrc_coefficients(self)

    def forward(self, x: torch.Tensor):
        if not self.mixed_depth:
            return self.forward_head(self.forward_features(x))
        deep = self.forward_head(self.forward_features(x), pre_logits=True)
        if self.mixed_depth_fusion == "mean_features":
            return self.head((deep + self.forward_head(self.forward_features(x, max_loops=1), pre_logits=True)) / 2)
        if self.training and not torch.jit.is_scripting():  # TorchScript: the deep branch, as in SReT's forward
            shallow = self.forward_head(self.forward_features(x, max_loops=1), pre_logits=True)
            return MixedDepthLogits(self.head(deep), self.head(shallow))
        return self.head(deep)


class LRCMixerBlock(MixerBlock):
    """timm's Mixer block with LRC on the token- and channel-mixing residuals [assumption: Eq. 9's form]."""

    lrc_roles = {
        "coefficient1": "token_id",
        "coefficient2": "token_res",
        "coefficient3": "channel_id",
        "coefficient4": "channel_res",
    }

    def __init__(self, dim: int, seq_len: int, *args, lrc: str = "both", **kwargs):
        super().__init__(dim, seq_len, *args, **kwargs)
        dd = {"device": kwargs.get("device"), "dtype": kwargs.get("dtype")}
        self.coefficient1, self.coefficient2 = _coefficients(lrc, **dd)
        self.coefficient3, self.coefficient4 = _coefficients(lrc, **dd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.mlp_tokens(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        if hasattr(self, "residual1"):  # fused for inference (static for TorchScript): see fuse_lrc_for_inference
            x = self.residual1(x, tokens)
            return self.residual2(x, self.mlp_channels(self.norm2(x)))
        else:
            x = self.coefficient1(x) + self.coefficient2(self.drop_path(tokens))
            return self.coefficient3(x) + self.coefficient4(self.drop_path(self.mlp_channels(self.norm2(x))))


class RecursiveMlpMixer(_InferenceFusion, MlpMixer):
    """timm's MLP-Mixer with every layer applied ``loops`` times, no NLL (Eq. 7, App. H), optional LRC."""

    def __init__(self, loops: int = 2, lrc: str = "none", **kwargs):
        _choice("lrc", lrc, LRC_DESIGNS)
        if loops < 1:
            raise ValueError(f"loops={loops}: each layer must run at least once")
        if lrc != "none":
            kwargs["block_layer"] = partial(LRCMixerBlock, lrc=lrc)
        super().__init__(**kwargs)
        self.loops = loops

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for block in self.blocks:
            for _ in range(self.loops):
                # per block application (timm's flag; the loops are not one sequence); inline for TorchScript
                if self.grad_checkpointing and not torch.jit.is_scripting() and torch.is_grad_enabled():
                    x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
                else:
                    x = block(x)
        return self.norm(x)

    def forward_intermediates(
        self,
        x: torch.Tensor,
        indices: int | list[int] | None = None,
        norm: bool = False,
        stop_early: bool = False,
        output_fmt: str = "NCHW",
        intermediates_only: bool = False,
    ):
        """timm's Mixer feature API over the recursion: intermediate i is block i's output after its ``loops``
        applications; the final output is ``forward_features``'s."""
        if output_fmt not in ("NCHW", "NLC"):
            raise ValueError(f"output_fmt must be 'NCHW' or 'NLC', not {output_fmt!r}")
        take_indices, max_index = feature_take_indices(len(self.blocks), indices)
        B, _, height, width = x.shape
        x = self.stem(x)
        intermediates = []
        for i, block in enumerate(self.blocks[: max_index + 1] if stop_early else self.blocks):
            for _ in range(self.loops):
                x = block(x)
            if i in take_indices:
                intermediates.append(self.norm(x) if norm else x)
        if output_fmt == "NCHW":
            H, W = self.stem.dynamic_feat_size((height, width))
            intermediates = [y.reshape(B, H, W, -1).permute(0, 3, 1, 2).contiguous() for y in intermediates]
        return intermediates if intermediates_only else (self.norm(x), intermediates)

    def lrc_coefficients(self) -> dict[str, dict[str, float]]:
        return lrc_coefficients(self)


# -------------------------------------------------------------------------------------------- registration


def _cfg(input_size: int = 224, **kwargs) -> dict:
    # the positional embedding is fixed to img_size (Sec. 4 of the paper; official code), hence fixed_input_size
    return {
        "num_classes": 1000,
        "input_size": (3, input_size, input_size),
        "pool_size": (input_size // 32,) * 2,
        "fixed_input_size": True,
        "crop_pct": 0.875 if input_size == 224 else 1.0,
        "interpolation": "bicubic",
        "mean": IMAGENET_DEFAULT_MEAN,
        "std": IMAGENET_DEFAULT_STD,
        "first_conv": "patch_embed.conv1",
        "classifier": "head",
        **kwargs,
    }


_SRET_NAMES = [
    "SReT_T",
    "SReT_LT",
    "SReT_S",
    "SReT_T_distill",
    "SReT_LT_distill",
    "SReT_S_distill",
    "SReT_T_wo_slice",
    "SReT_LT_wo_slice",
    "SReT_S_wo_slice",
    "SReT_T_wo_slice_distill",
    "SReT_LT_wo_slice_distill",
    "SReT_S_wo_slice_distill",
    "SReT_ExT_placeholder",
    "SReT_B_as_printed",
]
_FINETUNE_NAMES = {
    "SReT_T_finetune_384": 384,
    "SReT_LT_finetune_384": 384,
    "SReT_T_wo_slice_finetune_384": 384,
    "SReT_LT_wo_slice_finetune_384": 384,
    "SReT_S_wo_slice_finetune_384": 384,
    "SReT_S_wo_slice_finetune_512": 512,
}
default_cfgs = generate_default_cfgs(
    {
        **{name: _cfg() for name in _SRET_NAMES},
        **{name: _cfg(size) for name, size in _FINETUNE_NAMES.items()},
        "deit_tiny_naive_recursive": _cfg(first_conv="patch_embed.proj", pool_size=None),
        "SReT_108": _cfg(first_conv="patch_embed.proj", pool_size=None),
        "SReT_108_mixed_depth": _cfg(first_conv="patch_embed.proj", pool_size=None),
        "mixer_b16_224_recursive": _cfg(
            first_conv="stem.proj", mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), pool_size=None
        ),
        "mixer_b16_224_recursive_lrc": _cfg(
            first_conv="stem.proj", mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), pool_size=None
        ),
    }
)

# Variant configs (Table 10, App. G; the official code's stems and ratios).
# Widths = base_dims × heads: T/TL 64/128/256, S 126/252/504.
_TINY = dict(
    base_dims=(32, 32, 32), heads=(2, 4, 8), num_blocks=(2, 5, 3), mlp_ratio=3.6, nll_ratio=1.0, drop_path_rate=0.1
)
_TINY_LARGE = dict(_TINY, mlp_ratio=4.0)
_SMALL = dict(
    base_dims=(42, 42, 42), heads=(3, 6, 12), num_blocks=(2, 5, 3), mlp_ratio=3.0, nll_ratio=2.0, drop_path_rate=0.2
)
_SLICED = dict(groups=((8, 2), (4, 1), (1, 1)))
_NOT_SLICED = dict(groups=((1, 1), (1, 1), (1, 1)))


def _create_sret(variant: str, pretrained: bool = False, **kwargs) -> SlicedRecursiveTransformer:
    out_indices = kwargs.pop("out_indices", (0, 1, 2))
    return build_model_with_cfg(
        SlicedRecursiveTransformer,
        variant,
        pretrained,
        pretrained_filter_fn=checkpoint_filter_fn,
        feature_cfg=dict(out_indices=out_indices, feature_cls="getter"),
        **kwargs,
    )


def _sret(variant: str, config: dict, pretrained: bool, kwargs: dict, **extra) -> SlicedRecursiveTransformer:
    return _create_sret(variant, pretrained, **{**config, **extra, **kwargs})


@register_model
def SReT_T(pretrained=False, **kwargs) -> SlicedRecursiveTransformer:
    """SReT-T: 4,755,979 params, groups [8,2][4,1][1,1] (Table 4: 4.8M, 1.1G, 76.0%)."""
    return _sret("SReT_T", {**_TINY, **_SLICED}, pretrained, kwargs)


@register_model
def SReT_LT(pretrained=False, **kwargs) -> SlicedRecursiveTransformer:
    """SReT-TL (official name SReT_LT): FFN ratio 4.0; 4,988,024 params (5.0M, 1.2G, 76.7%)."""
    return _sret("SReT_LT", {**_TINY_LARGE, **_SLICED}, pretrained, kwargs)


@register_model
def SReT_S(pretrained=False, **kwargs) -> SlicedRecursiveTransformer:
    """SReT-S: widths 126/252/504, NLL ratio 2.0; 20,899,692 params (20.9M, 4.2G, 81.5%)."""
    return _sret("SReT_S", {**_SMALL, **_SLICED}, pretrained, kwargs)


@register_model
def SReT_T_distill(pretrained=False, **kwargs) -> SlicedRecursiveTransformer:
    """SReT-T for/from soft-label distillation: same network and single head as SReT_T (App. E)."""
    return _sret("SReT_T_distill", {**_TINY, **_SLICED}, pretrained, kwargs)


@register_model
def SReT_LT_distill(pretrained=False, **kwargs) -> SlicedRecursiveTransformer:
    """SReT-TL distilled (same network as SReT_LT)."""
    return _sret("SReT_LT_distill", {**_TINY_LARGE, **_SLICED}, pretrained, kwargs)


@register_model
def SReT_S_distill(pretrained=False, **kwargs) -> SlicedRecursiveTransformer:
    """SReT-S distilled (same network as SReT_S; unregistered in the official code)."""
    return _sret("SReT_S_distill", {**_SMALL, **_SLICED}, pretrained, kwargs)


@register_model
def SReT_T_wo_slice(pretrained=False, **kwargs) -> SlicedRecursiveTransformer:
    """SReT-*T: global attention in every loop (Table 4: 4.8M, 1.4G, 76.1%)."""
    return _sret("SReT_T_wo_slice", {**_TINY, **_NOT_SLICED}, pretrained, kwargs)


@register_model
def SReT_LT_wo_slice(pretrained=False, **kwargs) -> SlicedRecursiveTransformer:
    """SReT-*TL (= Table 3's "full components"): 5.0M, 1.4G, 76.8%."""
    return _sret("SReT_LT_wo_slice", {**_TINY_LARGE, **_NOT_SLICED}, pretrained, kwargs)


@register_model
def SReT_S_wo_slice(pretrained=False, **kwargs) -> SlicedRecursiveTransformer:
    """SReT-*S: 20.9M, 4.7G, 81.6%."""
    return _sret("SReT_S_wo_slice", {**_SMALL, **_NOT_SLICED}, pretrained, kwargs)


@register_model
def SReT_T_wo_slice_distill(pretrained=False, **kwargs) -> SlicedRecursiveTransformer:
    """SReT-*T distilled (77.7%)."""
    return _sret("SReT_T_wo_slice_distill", {**_TINY, **_NOT_SLICED}, pretrained, kwargs)


@register_model
def SReT_LT_wo_slice_distill(pretrained=False, **kwargs) -> SlicedRecursiveTransformer:
    """SReT-*TL distilled (77.9%)."""
    return _sret("SReT_LT_wo_slice_distill", {**_TINY_LARGE, **_NOT_SLICED}, pretrained, kwargs)


@register_model
def SReT_S_wo_slice_distill(pretrained=False, **kwargs) -> SlicedRecursiveTransformer:
    """SReT-*S distilled (82.7%)."""
    return _sret("SReT_S_wo_slice_distill", {**_SMALL, **_NOT_SLICED}, pretrained, kwargs)


@register_model
def SReT_T_finetune_384(pretrained=False, **kwargs) -> SlicedRecursiveTransformer:
    """SReT-T distilled and fine-tuned at 384² (4.9M, 4.3G printed / 4.25G counted, 79.6%)."""
    return _sret("SReT_T_finetune_384", {**_TINY, **_SLICED}, pretrained, kwargs, img_size=384)


@register_model
def SReT_LT_finetune_384(pretrained=False, **kwargs) -> SlicedRecursiveTransformer:
    """SReT-TL distilled and fine-tuned at 384² (5.1M, 4.4G, 79.8%)."""
    return _sret("SReT_LT_finetune_384", {**_TINY_LARGE, **_SLICED}, pretrained, kwargs, img_size=384)


@register_model
def SReT_T_wo_slice_finetune_384(pretrained=False, **kwargs) -> SlicedRecursiveTransformer:
    """SReT-*T distilled and fine-tuned at 384² (4.9M, 6.4G, 79.7%)."""
    return _sret("SReT_T_wo_slice_finetune_384", {**_TINY, **_NOT_SLICED}, pretrained, kwargs, img_size=384)


@register_model
def SReT_LT_wo_slice_finetune_384(pretrained=False, **kwargs) -> SlicedRecursiveTransformer:
    """SReT-*TL distilled and fine-tuned at 384² (5.1M, 6.6G, 80.0%)."""
    return _sret("SReT_LT_wo_slice_finetune_384", {**_TINY_LARGE, **_NOT_SLICED}, pretrained, kwargs, img_size=384)


@register_model
def SReT_S_wo_slice_finetune_384(pretrained=False, **kwargs) -> SlicedRecursiveTransformer:
    """SReT-*S distilled and fine-tuned at 384² (21.0M printed / 21.09M, 18.5G, 83.8%)."""
    return _sret("SReT_S_wo_slice_finetune_384", {**_SMALL, **_NOT_SLICED}, pretrained, kwargs, img_size=384)


@register_model
def SReT_S_wo_slice_finetune_512(pretrained=False, **kwargs) -> SlicedRecursiveTransformer:
    """SReT-*S distilled and fine-tuned at 512² (21.3M, 42.8G, 84.3%)."""
    return _sret("SReT_S_wo_slice_finetune_512", {**_SMALL, **_NOT_SLICED}, pretrained, kwargs, img_size=512)


@register_model
def SReT_ExT_placeholder(pretrained=False, **kwargs) -> SlicedRecursiveTransformer:
    """PLACEHOLDER for SReT-ExT, whose architecture the paper does not give [assumption, docs/sret.md].

    T widths, blocks (1, 2, 4), FFN 3.0, NLL 0.5, groups [2,2][2,2][1,1]: fitted to the printed 4.0M / 0.7G
    (3,981,856 params, 0.707 GMACs). Not the paper's model.
    """
    return _sret(
        "SReT_ExT_placeholder",
        dict(_TINY, num_blocks=(1, 2, 4), mlp_ratio=3.0, nll_ratio=0.5, groups=((2, 2), (2, 2), (1, 1))),
        pretrained,
        kwargs,
    )


@register_model
def SReT_B_as_printed(pretrained=False, **kwargs) -> SlicedRecursiveTransformer:
    """SReT-B built exactly as Table 10 prints it — 144.7M params (145.6M with the usual C0/2→C0→C0 stem), NOT the
    printed 71.2M (Table 10; docs/sret.md).

    Stem 96→168→336, widths 336/672/1344, FFN 3.0, NLL 2.0, no slicing; heads are not given (head dim 42 as in
    SReT-S [assumption]). The paper's SReT-B cannot be reconstructed; use this only as a B-size config.
    """
    return _sret(
        "SReT_B_as_printed",
        dict(
            base_dims=(42, 42, 42),
            heads=(8, 16, 32),
            num_blocks=(2, 5, 3),
            mlp_ratio=3.0,
            nll_ratio=2.0,
            drop_path_rate=0.2,
            stem_channels=(96, 168, 336),
            **_NOT_SLICED,
        ),
        pretrained,
        kwargs,
    )


_DEIT_TINY = dict(patch_size=16, embed_dim=192, depth=12, num_heads=3)


def _create_recursive_vit(variant: str, pretrained: bool = False, **kwargs) -> RecursiveVisionTransformer:
    return build_model_with_cfg(RecursiveVisionTransformer, variant, pretrained, **kwargs)


@register_model
def deit_tiny_naive_recursive(pretrained=False, **kwargs) -> RecursiveVisionTransformer:
    """Table 1: DeiT-Tiny with each block run ``loops`` times (default 2 = "+1× naive recursive"), no NLL/LRC.

    Same parameters and state-dict layout as timm's ``deit_tiny_patch16_224`` (5,717,416).
    """
    return _create_recursive_vit("deit_tiny_naive_recursive", pretrained, **{**_DEIT_TINY, "loops": 2, **kwargs})


@register_model
def SReT_108(pretrained=False, **kwargs) -> RecursiveVisionTransformer:
    """SReT-108 [assumption, App. B; docs/sret.md]: 36 DeiT-Tiny blocks × 3 internal loops = 108 layers, LRC, class token.

    The paper gives only "one-third of DeiT-108" (48.4M); this is 16.4M. ``nll_ratio=1.0`` adds NLLs.
    """
    return _create_recursive_vit(
        "SReT_108", pretrained, **{**_DEIT_TINY, "depth": 36, "loops": 3, "lrc": "both", **kwargs}
    )


@register_model
def SReT_108_mixed_depth(pretrained=False, **kwargs) -> RecursiveVisionTransformer:
    """SReT-108 with mixed-depth training (App. B): shallow branch = one pass through the 36 blocks."""
    return _create_recursive_vit(
        "SReT_108_mixed_depth",
        pretrained,
        **{**_DEIT_TINY, "depth": 36, "loops": 3, "lrc": "both", "mixed_depth": True, **kwargs},
    )


_MIXER_B16 = dict(patch_size=16, num_blocks=12, embed_dim=768)


@register_model
def mixer_b16_224_recursive(pretrained=False, **kwargs) -> RecursiveMlpMixer:
    """Fig. 7(1): Mixer-B/16 with each layer applied twice (59,880,472 params, 2× the FLOPs)."""
    return build_model_with_cfg(
        RecursiveMlpMixer, "mixer_b16_224_recursive", pretrained, **{**_MIXER_B16, "loops": 2, **kwargs}
    )


@register_model
def mixer_b16_224_recursive_lrc(pretrained=False, **kwargs) -> RecursiveMlpMixer:
    """Fig. 7(1): recursive Mixer-B/16 with learnable residual coefficients."""
    return build_model_with_cfg(
        RecursiveMlpMixer,
        "mixer_b16_224_recursive_lrc",
        pretrained,
        **{**_MIXER_B16, "loops": 2, "lrc": "both", **kwargs},
    )
