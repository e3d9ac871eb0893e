"""StepsNet — "Step by Step Network" (Han, Ye, Xia, Chen, Wang, Chen, Huang; arXiv 2511.14329).

StepsNet is a macro architecture: it turns a stack of residual blocks into an n-step network. The input
``x`` (C channels) is split along channels into contiguous slices ``x_1..x_n``; a narrow residual stack
``F_1`` runs on ``x_1`` alone, its output is concatenated (previous output *first*) with the next raw slice
and fed to the wider ``F_2``, and so on until ``F_n`` runs at the full width::

    y_1 = F_1(x_1),   y_i = F_i([y_{i-1}, x_i])   (i = 2..n),   output y_n

There is nothing between steps but slicing and concatenation, a step may have zero blocks, and the 1-step
case is the plain residual stack. ``StepsNet`` below is that macro; every model in this file uses it
around timm's own blocks (``Block``, ``SwinTransformerBlock``, ``BasicBlock``, ``Bottleneck``) inside timm's
own model classes, so a baseline and its Steps twin differ only in the macro.

Citations are to the paper (§, Eq., Table); what the paper leaves open is a constructor argument whose default
is marked [ASSUMED] or [DERIVED] here and explained in ``docs/stepsnet.md`` ("Facts the code relies on").
Registered models (``depthbench models --family stepsnet``):

* Table 1 / 12-14: ``steps_resnet{18,34,50}``, ``steps_deit_{tiny,small,base}``, ``steps_swin_{tiny,small,base}``;
  ``steps_deit_base_302l`` is the second, 5-step Steps-DeiT-B of Table 13 and the text (docs/stepsnet.md).
* Table 4: ``transformer_lm_{30m,44m,63m}`` (baselines) and ``steps_lm_{30m,45m,64m}``.
* Table 5(a): ``deit_w136_d{24,36,48,72,96}`` and ``steps_deit_w136_d{24,36,48,72,96}``;
  Table 5(b): ``swin_fixflops_d{24,48,72,96}`` and ``steps_swin_fixflops_d14``.
* Table 8: ``steps_deit_small_n{1..5}``; Table 9: ``steps_deit_small_d{D1}_{D2}_{D3}``;
  Table 10: ``steps_swin_tiny_reverse``; Table 11: ``steps_swin_tiny_stage{1,2,3,4}``.

Analysis hooks for Tables 6 and 7 (on a trained model, no retraining): ``StepsNet.mask_first`` /
``mask_last`` zero the first (slow path) or last (fast path) input channels, ``StepsNet.skip_last[i]`` drops
the last blocks of step i; ``stepsnet_analysis(model, ...)`` sets them for the duration of a ``with`` block.
``StepsNet.register_state_hook`` reports the full-width state after every block (the shortcut-ratio probe).
"""

from collections import OrderedDict
from contextlib import contextmanager
from typing import Callable, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
import torch.utils.checkpoint
from torch import nn
from torch.utils.hooks import RemovableHandle

from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
from timm.layers import (
    Attention,
    ClassifierHead,
    DropPath,
    LayerNorm,
    Mlp,
    RmsNorm,
    SwiGLU,
    get_act_layer,
    get_norm_layer,
)
from timm.models import build_model_with_cfg, generate_default_cfgs, register_model
from timm.models._features import feature_take_indices
from timm.models.resnet import BasicBlock, Bottleneck, ResNet
from timm.models.swin_transformer import PatchMerging, SwinTransformer, SwinTransformerBlock, resolve_stage_window_sizes
from timm.models.vision_transformer import Block, VisionTransformer

__all__ = [
    "StepsNet",
    "ReverseStepsNet",
    "StepsVisionTransformer",
    "StepsSwinTransformer",
    "StepsResNet",
    "TransformerLM",
    "stepsnet_analysis",
    "residual_blocks",
]


# ----------------------------------------------------------------------------------------------- the macro
class StepsNet(nn.Module):
    """n-step network over channel slices (§4.1, Eq. 5).

    Args:
        widths: step widths ``C_1 < ... < C_n``; ``C_n`` is the nominal full width.
        depths: blocks per step ``D_1..D_n`` (0 allowed: that step passes its input through).
        make_block: ``make_block(step, index, width) -> nn.Module``, a residual block at ``width`` channels.
        in_width: channels the module actually receives (default ``C_n``). Must be one of ``widths``; the
            steps wider than it must be empty. This is how Steps-Swin's stage 4 runs at 544 channels while the
            table lists an empty 768-wide step (Table 14; docs/stepsnet.md, "stage-4 width").
        channel_dim: the channel axis (-1 for tokens / channels-last, 1 for NCHW convnets).

    Analysis attributes (eval-time, Tables 6/7): ``mask_first`` / ``mask_last`` zero that many leading /
    trailing input channels before the first step; ``skip_last[i]`` skips the last blocks of step ``i``.
    """

    def __init__(
        self,
        widths: Sequence[int],
        depths: Sequence[int],
        make_block: Callable[[int, int, int], nn.Module],
        in_width: Optional[int] = None,
        channel_dim: int = -1,
    ):
        super().__init__()
        widths, depths = [int(w) for w in widths], [int(d) for d in depths]
        if not widths or len(widths) != len(depths):
            raise ValueError(f"StepsNet needs one depth per width; got widths {widths} and depths {depths}")
        if any(b <= a for a, b in zip(widths, widths[1:])) or widths[0] <= 0:
            raise ValueError(f"StepsNet widths must be positive and strictly increasing, got {widths}")
        if any(d < 0 for d in depths):
            raise ValueError(f"StepsNet depths must be >= 0, got {depths}")
        in_width = widths[-1] if in_width is None else int(in_width)
        if in_width not in widths:
            raise ValueError(f"StepsNet in_width {in_width} must be one of the step widths {widths}")
        if any(d > 0 for w, d in zip(widths, depths) if w > in_width):
            raise ValueError(
                f"StepsNet steps wider than in_width {in_width} must be empty; got widths {widths}, depths {depths}"
            )
        self.widths, self.depths, self.in_width, self.channel_dim = widths, depths, in_width, channel_dim
        self.steps = nn.ModuleList(
            nn.Sequential(*[make_block(i, j, w) for j in range(d)]) for i, (w, d) in enumerate(zip(widths, depths))
        )
        self._slices = self.slices()
        self._split_sizes = [hi - lo for lo, hi in self._slices]  # Python ints (TorchScript, fx); 0 = empty
        self.mask_first = 0
        self.mask_last = 0
        self.skip_last = [0] * len(widths)
        self.grad_checkpointing = False
        self._state_hooks: OrderedDict[int, Callable] = OrderedDict()

    # blocks in forward order; iterating is for inspection (e.g. timm's set_input_size), *not* a forward
    def __iter__(self):
        return (block for step in self.steps for block in step)

    def __len__(self) -> int:
        return sum(len(step) for step in self.steps)

    def __bool__(self) -> bool:
        return True

    @property
    def out_width(self) -> int:
        return self.in_width

    def slices(self) -> list[tuple[int, int]]:
        """``[lo, hi)`` channel range of each raw slice ``x_i`` (empty ranges for steps beyond ``in_width``)."""
        bounds = [0] + [min(w, self.in_width) for w in self.widths]
        return [(lo, max(lo, hi)) for lo, hi in zip(bounds, bounds[1:])]

    def register_state_hook(self, hook: Callable) -> RemovableHandle:
        """Call ``hook(stepsnet, step, index, state)`` after every block with the full-width state
        ``[current step output, untouched slices x_{i+1..n}]`` (the state of §3.1 / Fig. 2's shortcut ratio)."""
        handle = RemovableHandle(self._state_hooks)
        self._state_hooks[handle.id] = hook
        return handle

    def _masked(self, x: torch.Tensor) -> torch.Tensor:
        d = self.channel_dim
        keep = torch.ones(x.shape[d], dtype=x.dtype, device=x.device)
        if self.mask_first:
            keep[: self.mask_first] = 0
        if self.mask_last:
            keep[keep.shape[0] - self.mask_last :] = 0
        shape = [1] * x.dim()
        shape[d] = -1
        return x * keep.view(shape)

    @torch.jit.unused
    def _check_input(self, x: torch.Tensor) -> None:
        if isinstance(x, torch.Tensor) and x.shape[self.channel_dim] != self.in_width:  # (not an fx Proxy)
            raise ValueError(
                f"StepsNet expects {self.in_width} channels on dim {self.channel_dim}, got shape {tuple(x.shape)}"
            )

    @torch.jit.unused  # analysis hooks are Python callables; a scripted model never calls this
    def _has_state_hooks(self) -> bool:
        return bool(self._state_hooks)

    @torch.jit.unused
    def _report_state(self, x: torch.Tensor, y: torch.Tensor, i: int, j: int) -> None:
        state = self.full_state(x, y, i)
        for hook in list(self._state_hooks.values()):
            hook(self, i, j, state)

    def full_state(self, x: torch.Tensor, y: torch.Tensor, step: int) -> torch.Tensor:
        """``[y_i, x_{i+1..n}]``: the output ``y`` of step ``step`` followed by the slices no step has read yet,
        i.e. the network state at full width after a block of that step."""
        width = self._slices[step][1]  # a Python int (not y.shape), so torch.fx traces this
        rest = self.in_width - width
        if rest == 0:
            return y
        return torch.cat([y, x.narrow(self.channel_dim, width, rest)], self.channel_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_intermediates(x, [])[0]

    def forward_intermediates(
        self, x: torch.Tensor, take_indices: List[int], stop_index: int = -1
    ) -> Tuple[torch.Tensor, List[torch.Tensor]]:
        """The output and the full-width states (``full_state``) after the blocks at ``take_indices`` (forward
        order); with ``stop_index`` >= 0 the blocks after that one are not run and the output is the state
        there. Python-int control flow only, so TorchScript and torch.fx follow it."""
        d = self.channel_dim
        if not torch.jit.is_scripting():
            self._check_input(x)
        if self.mask_first or self.mask_last:
            x = self._masked(x)
        states: List[torch.Tensor] = []
        # x_1..x_n as one split: in backward their gradients are put together by one concatenation, where
        # n separate narrows would each allocate a zero-filled full-width gradient and add them up
        pieces = torch.split(x, self._split_sizes, dim=d)
        y = pieces[0]  # x_1; later steps put the previous output first, then x_i
        index = 0
        stopped = False
        for i, step in enumerate(self.steps):
            lo, hi = self._slices[i]
            if i > 0 and hi > lo and not stopped:
                y = torch.cat([y, pieces[i]], dim=d)
            run = len(step) - self.skip_last[i]
            for j, block in enumerate(step):
                if j < run and not stopped:
                    if self.grad_checkpointing and not torch.jit.is_scripting() and torch.is_grad_enabled():
                        y = torch.utils.checkpoint.checkpoint(block, y, use_reentrant=False)
                    else:
                        y = block(y)
                    if not torch.jit.is_scripting() and self._has_state_hooks():
                        self._report_state(x, y, i, j)
                    if index in take_indices:
                        states.append(self.full_state(x, y, i))
                    if index == stop_index:
                        stopped = True
                        y = self.full_state(x, y, i)
                index += 1
        return y, states

    def truncate(self, num_blocks: int) -> None:
        """Keep only the first ``num_blocks`` blocks (timm's ``prune_intermediate_layers``): the later steps
        keep their raw slices and no blocks, so the output is the full-width state after the last kept one."""
        for step in self.steps:
            keep = max(0, min(len(step), num_blocks))
            num_blocks -= len(step)
            while len(step) > keep:
                del step[len(step) - 1]


class ReverseStepsNet(nn.Module):
    """The wide-to-narrow ablation of Table 10 (Eq. 6): ``x_{i+1}, y_i = Split(F_i(x_i))``, ``y_n = F_n(x_n)``.

    ``widths`` decrease (``widths[0]`` = input width). [ASSUMED, docs/stepsnet.md] the first ``widths[i+1]`` channels
    continue to the next step, the rest are ``y_i``; the output is ``[y_1, ..., y_n]`` in the paper's order.
    Parameters and FLOPs equal those of the StepsNet with the same blocks.
    """

    def __init__(
        self,
        widths: Sequence[int],
        depths: Sequence[int],
        make_block: Callable[[int, int, int], nn.Module],
        channel_dim: int = -1,
    ):
        super().__init__()
        widths, depths = [int(w) for w in widths], [int(d) for d in depths]
        if not widths or len(widths) != len(depths) or any(b >= a for a, b in zip(widths, widths[1:])):
            raise ValueError(
                f"ReverseStepsNet needs strictly decreasing widths with one depth each; got {widths}, {depths}"
            )
        self.widths, self.depths, self.channel_dim = widths, depths, channel_dim
        self.in_width = widths[0]
        self.steps = nn.ModuleList(
            nn.Sequential(*[make_block(i, j, w) for j in range(d)]) for i, (w, d) in enumerate(zip(widths, depths))
        )

    def __iter__(self):
        return (block for step in self.steps for block in step)

    def __len__(self) -> int:
        return sum(len(step) for step in self.steps)

    def __bool__(self) -> bool:
        return True

    @property
    def out_width(self) -> int:
        return self.in_width

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = self.channel_dim
        outputs: List[torch.Tensor] = []
        for i, step in enumerate(self.steps):
            x = step(x)
            if i + 1 < len(self.widths):  # widths are Python ints, so TorchScript and torch.fx follow this
                keep = self.widths[i + 1]
                outputs.append(x.narrow(d, keep, self.widths[i] - keep))
                x = x.narrow(d, 0, keep)
        outputs.append(x)
        return torch.cat(outputs, dim=d)


def stepsnet_modules(model: nn.Module) -> list[StepsNet]:
    return [m for m in model.modules() if isinstance(m, StepsNet)]


@contextmanager
def stepsnet_analysis(
    model: nn.Module,
    mask_first: int = 0,
    mask_last: int = 0,
    drop_last: Optional[dict[int, int]] = None,
    stage: Optional[int] = None,
):
    """Temporarily apply the Table 6/7 interventions to the model's StepsNet.

    ``mask_first``/``mask_last``: zero that many first (slow path, ``x_1``) / last (fast paths) channels of
    the StepsNet input. ``drop_last={step: k}``: skip the last ``k`` blocks of step ``step`` (0-based).
    Models with several StepsNets (Steps-Swin, Steps-ResNet) need ``stage`` = index among them.
    """
    nets = stepsnet_modules(model)
    if not nets:
        raise ValueError(f"{type(model).__name__} has no StepsNet; use a steps_* model")
    if (stage is None and len(nets) > 1) or (stage is not None and not 0 <= stage < len(nets)):
        raise ValueError(f"the model has {len(nets)} StepsNet(s); pass stage=0..{len(nets) - 1}, not {stage}")
    net = nets[stage or 0]
    for i, k in (drop_last or {}).items():
        if not 0 <= i < len(net.steps) or not 0 <= k <= len(net.steps[i]):
            raise ValueError(f"cannot drop {k} blocks of step {i}: the StepsNet has depths {net.depths}")
    if mask_first + mask_last > net.in_width or min(mask_first, mask_last) < 0:
        raise ValueError(
            f"mask_first={mask_first} and mask_last={mask_last} must be >= 0 and together fit the "
            f"{net.in_width} input channels"
        )
    saved = (net.mask_first, net.mask_last, list(net.skip_last))
    net.mask_first, net.mask_last = mask_first, mask_last
    for i, k in (drop_last or {}).items():
        net.skip_last[i] = k
    try:
        yield net
    finally:
        net.mask_first, net.mask_last, net.skip_last = saved


# names of the residual block classes (timm's and ours); used to find blocks and to count #Blocks
RESIDUAL_BLOCK_TYPES = ("Block", "SwinTransformerBlock", "BasicBlock", "Bottleneck", "DecoderBlock")


def residual_blocks(model: nn.Module) -> list[nn.Module]:
    """The model's residual blocks in forward order (registration order is forward order for these models)."""
    return [m for m in model.modules() if type(m).__name__ in RESIDUAL_BLOCK_TYPES]


def _set_drop_path(blocks: Sequence[nn.Module], max_rate: float) -> None:
    """Stochastic depth rising linearly over *all* blocks in forward order (timm's rule; Appendix A recipes)."""
    n = len(blocks)
    for k, block in enumerate(blocks):
        rate = max_rate * k / (n - 1) if n > 1 else 0.0
        if hasattr(block, "drop_path1"):  # timm Block / SwinTransformerBlock
            block.drop_path1 = DropPath(rate) if rate > 0 else nn.Identity()
            block.drop_path2 = DropPath(rate) if rate > 0 else nn.Identity()
        elif hasattr(block, "drop_path"):  # timm BasicBlock / Bottleneck / DecoderBlock
            block.drop_path = DropPath(rate) if rate > 0 else None


def _on_meta() -> bool:
    """Built under ``torch.device('meta')`` (audits): there are no values to initialise, so skip the slow init."""
    return torch.empty(0).device.type == "meta"


def _check_steps(steps, what: str) -> None:
    for s in steps:
        if len(s) != 3 or any(int(v) != v or v < 0 for v in s) or s[0] <= 0 or s[1] <= 0 or s[0] % s[1]:
            raise ValueError(f"{what}: each step is (width, heads, depth) with width divisible by heads; got {s}")


# ------------------------------------------------------------------------------------------------ DeiT
class StepsVisionTransformer(VisionTransformer):
    """Steps-DeiT: timm's VisionTransformer with its block stack replaced by a StepsNet (Appendix B, Table 13).

    Patch embedding, cls token, position embedding, final norm and head stay at the full width (the widest
    step). The split covers the whole token sequence including the cls token.

    Args:
        steps: ``((width, heads, depth), ...)`` from narrow to wide.
        drop_path_rate: max stochastic depth, linear over all blocks in forward order.
        Other arguments are VisionTransformer's; the block arguments (incl. ``block_fn``, ``mlp_layer``,
        ``attn_layer``) go to every block, as they would in the baseline.
    """

    def __init__(
        self,
        steps: Sequence[Sequence[int]],
        mlp_ratio: float = 4.0,
        qkv_bias: bool = True,
        qk_norm: bool = False,
        scale_attn_norm: bool = False,
        scale_mlp_norm: bool = False,
        proj_bias: bool = True,
        init_values: Optional[float] = None,
        proj_drop_rate: float = 0.0,
        attn_drop_rate: float = 0.0,
        drop_path_rate: float = 0.0,
        norm_layer=None,
        act_layer=None,
        block_fn: Callable[..., nn.Module] = Block,
        mlp_layer: Callable[..., nn.Module] = Mlp,
        attn_layer=Attention,
        weight_init: str = '',
        device=None,
        dtype=None,
        **kwargs,
    ):
        _check_steps(steps, "Steps-DeiT")
        for key in ("embed_dim", "depth", "num_heads"):
            if key in kwargs:
                raise ValueError(f"Steps-DeiT takes its widths from 'steps', not {key!r}")
        widths, heads, depths = zip(*[tuple(int(v) for v in s) for s in steps])
        super().__init__(
            embed_dim=widths[-1],
            depth=0,
            num_heads=heads[-1],
            mlp_ratio=mlp_ratio,
            qkv_bias=qkv_bias,
            qk_norm=qk_norm,
            proj_bias=proj_bias,
            init_values=init_values,
            proj_drop_rate=proj_drop_rate,
            attn_drop_rate=attn_drop_rate,
            norm_layer=norm_layer,
            act_layer=act_layer,
            weight_init='skip',
            device=device,
            dtype=dtype,
            **kwargs,
        )
        norm_layer = get_norm_layer(norm_layer) or LayerNorm  # timm ViT's default (eps 1e-6)
        act_layer = get_act_layer(act_layer) or nn.GELU
        first_index = [sum(depths[:i]) for i in range(len(depths))]  # a block's index in forward order

        def make_block(i, j, width):
            return block_fn(
                dim=width,
                num_heads=heads[i],
                mlp_ratio=mlp_ratio,
                qkv_bias=qkv_bias,
                qk_norm=qk_norm,
                scale_attn_norm=scale_attn_norm,
                scale_mlp_norm=scale_mlp_norm,
                proj_bias=proj_bias,
                init_values=init_values,
                proj_drop=proj_drop_rate,
                attn_drop=attn_drop_rate,
                norm_layer=norm_layer,
                act_layer=act_layer,
                mlp_layer=mlp_layer,
                attn_layer=attn_layer,
                depth=first_index[i] + j,
                device=device,
                dtype=dtype,
            )

        self.blocks = StepsNet(widths, depths, make_block)
        _set_drop_path(list(self.blocks), drop_path_rate)
        self.step_heads = heads
        # one feature per block, as timm's ViT; each is the full-width state [y_i, x_{i+1..n}] (StepsNet.full_state)
        reduction = self.patch_embed.feat_ratio(as_scalar=True)
        self.feature_info = [
            dict(module=f"blocks.steps.{i}.{j}", num_chs=widths[-1], reduction=reduction)
            for i, d in enumerate(depths)
            for j in range(d)
        ]
        self.weight_init_mode = 'reset' if weight_init == 'skip' else weight_init
        if weight_init != 'skip' and not _on_meta():
            self.init_weights(needs_reset=False)

    def set_grad_checkpointing(self, enable: bool = True) -> None:
        self.blocks.grad_checkpointing = enable  # per block inside the macro; timm's checkpoint_seq would skip it

    # No attn_mask/is_causal arguments (timm's ViT applies them block by block; the StepsNet runs its blocks
    # on slices of different widths), which also keeps forward traceable by torch.fx.
    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm_pre(self.patch_drop(self._pos_embed(self.patch_embed(x))))
        return self.norm(self.blocks(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_head(self.forward_features(x))

    def forward_intermediates(
        self,
        x: torch.Tensor,
        indices: Optional[Union[int, List[int]]] = None,
        return_prefix_tokens: bool = False,
        norm: bool = False,
        stop_early: bool = False,
        output_fmt: str = 'NCHW',
        intermediates_only: bool = False,
    ):
        """timm's ViT ``forward_intermediates``: one feature per block (in forward order), each the full-width
        state ``[y_i, x_{i+1..n}]`` after that block, so every feature has ``embed_dim`` channels."""
        if output_fmt not in ('NCHW', 'NLC'):
            raise ValueError(f"output_fmt must be 'NCHW' or 'NLC', not {output_fmt!r}")
        take_indices, max_index = feature_take_indices(len(self.blocks), indices)
        B, _, height, width = x.shape
        x = self.norm_pre(self.patch_drop(self._pos_embed(self.patch_embed(x))))
        x, intermediates = self.blocks.forward_intermediates(x, take_indices, max_index if stop_early else -1)
        if norm:
            intermediates = [self.norm(y) for y in intermediates]
        prefix_tokens = [y[:, : self.num_prefix_tokens] for y in intermediates]
        intermediates = [y[:, self.num_prefix_tokens :] for y in intermediates]
        if output_fmt == 'NCHW':
            H, W = self.patch_embed.dynamic_feat_size((height, width))
            intermediates = [y.reshape(B, H, W, -1).permute(0, 3, 1, 2).contiguous() for y in intermediates]
        if return_prefix_tokens and self.num_prefix_tokens:
            intermediates = list(zip(intermediates, prefix_tokens))
        if intermediates_only:
            return intermediates
        return self.norm(x), intermediates

    def prune_intermediate_layers(
        self, indices: Union[int, List[int]] = 1, prune_norm: bool = False, prune_head: bool = True
    ) -> List[int]:
        take_indices, max_index = feature_take_indices(len(self.blocks), indices)
        self.blocks.truncate(max_index + 1)
        self.feature_info = self.feature_info[: max_index + 1]
        if prune_norm:
            self.norm = nn.Identity()
        if prune_head:
            self.fc_norm = nn.Identity()
            self.reset_classifier(0, '')
        return take_indices


# ------------------------------------------------------------------------------------------------ Swin
class StepsSwinTransformer(SwinTransformer):
    """Steps-Swin: timm's SwinTransformer where selected stages run a StepsNet of SwinTransformerBlocks.

    Args:
        embed_dim, depths, num_heads: the baseline Swin (used as is for the stages without steps).
        stage_steps: per stage, ``None`` (plain Swin stage) or ``((width, heads, depth), ...)``. The StepsNet
            input is the stage's PatchMerging output; the stage width is the widest *non-empty* step, so
            Steps-Swin-T's stage 4 runs at 544 channels: PatchMerging 1536→544, final norm and head at 544
            (Tables 1/14 parameter counts require it; docs/stepsnet.md, "stage-4 width").
        reverse: use the wide-to-narrow ReverseStepsNet (Table 10) with the same blocks, reversed.
        drop_path_rate: max stochastic depth, linear over all blocks in forward order.
    Shifted windows restart in every step: block j of a step is shifted when j is odd [ASSUMED, docs/stepsnet.md].
    """

    def __init__(
        self,
        stage_steps: Sequence[Optional[Sequence[Sequence[int]]]],
        embed_dim: int = 96,
        depths: Sequence[int] = (2, 2, 6, 2),
        num_heads: Sequence[int] = (3, 6, 12, 24),
        window_size=7,
        always_partition: bool = False,
        strict_img_size: bool = True,
        dynamic_img_size: bool = False,
        mlp_ratio: float = 4.0,
        qkv_bias: bool = True,
        proj_drop_rate: float = 0.0,
        attn_drop_rate: float = 0.0,
        drop_path_rate: float = 0.1,
        norm_layer=nn.LayerNorm,
        reverse: bool = False,
        weight_init: str = '',
        device=None,
        dtype=None,
        **kwargs,
    ):
        if len(stage_steps) != len(depths):
            raise ValueError(f"stage_steps needs one entry per stage ({len(depths)}), got {len(stage_steps)}")
        for s, steps in enumerate(stage_steps):
            if steps is not None:
                _check_steps(steps, "Steps-Swin")
                if not any(d for w, h, d in steps):
                    raise ValueError(f"Steps-Swin stage {s + 1} has no blocks in any step; use None for a plain stage")
        dd = dict(device=device, dtype=dtype)
        nominal = [int(embed_dim * 2**i) for i in range(len(depths))]
        widths = [n if s is None else max(w for w, h, d in s if d > 0) for n, s in zip(nominal, stage_steps)]
        super().__init__(
            embed_dim=embed_dim,
            depths=[d if s is None else 0 for d, s in zip(depths, stage_steps)],
            num_heads=num_heads,
            window_size=window_size,
            always_partition=always_partition,
            strict_img_size=strict_img_size,
            dynamic_img_size=dynamic_img_size,
            mlp_ratio=mlp_ratio,
            qkv_bias=qkv_bias,
            proj_drop_rate=proj_drop_rate,
            attn_drop_rate=attn_drop_rate,
            drop_path_rate=0.0,
            norm_layer=norm_layer,
            weight_init='skip',
            **dd,
            **kwargs,
        )
        norm_layer = get_norm_layer(norm_layer) if isinstance(norm_layer, str) else norm_layer
        windows = resolve_stage_window_sizes(window_size, len(depths))
        dynamic_mask = dynamic_img_size or not strict_img_size
        if widths[0] != embed_dim:
            raise ValueError(f"stage 1 width must stay {embed_dim} (the patch embedding), got {widths[0]}")
        for s, steps in enumerate(stage_steps):
            stage = self.layers[s]
            if s > 0 and (widths[s] != nominal[s] or widths[s - 1] != nominal[s - 1]):
                stage.downsample = PatchMerging(dim=widths[s - 1], out_dim=widths[s], norm_layer=norm_layer, **dd)
            self.feature_info[s]["num_chs"] = widths[s]
            if steps is None:
                continue
            step_widths = [int(w) for w, h, d in steps]
            step_heads = {int(w): int(h) for w, h, d in steps}
            window = windows[s]

            def make_block(i, j, width, _heads=step_heads, _res=stage.output_resolution, _window=window):
                return SwinTransformerBlock(
                    dim=width,
                    input_resolution=_res,
                    num_heads=_heads[width],
                    window_size=_window,
                    shift_size=0 if j % 2 == 0 else tuple(w // 2 for w in _window),
                    always_partition=always_partition,
                    dynamic_mask=dynamic_mask,
                    mlp_ratio=mlp_ratio,
                    qkv_bias=qkv_bias,
                    proj_drop=proj_drop_rate,
                    attn_drop=attn_drop_rate,
                    norm_layer=norm_layer,
                    **dd,
                )

            if reverse:
                kept = [(w, d) for w, h, d in steps if w <= widths[s]]
                stage.blocks = ReverseStepsNet([w for w, _ in kept][::-1], [d for _, d in kept][::-1], make_block)
            else:
                stage.blocks = StepsNet(step_widths, [int(d) for w, h, d in steps], make_block, in_width=widths[s])
        if widths[-1] != self.num_features:
            self.num_features = self.head_hidden_size = widths[-1]
            self.norm = norm_layer(widths[-1], **dd)
            self.head = ClassifierHead(
                widths[-1],
                self.num_classes,
                pool_type=self.global_pool,
                drop_rate=self.head.drop.p if hasattr(self.head, "drop") else 0.0,
                input_fmt=self.output_fmt,
                **dd,
            )
            self.head_hidden_size = self.head.num_features
        self.stage_widths = tuple(widths)
        _set_drop_path(residual_blocks(self), drop_path_rate)
        self.weight_init_mode = 'reset' if weight_init == 'skip' else weight_init
        if weight_init != 'skip' and not _on_meta():
            self.init_weights(needs_reset=False)

    def set_grad_checkpointing(self, enable: bool = True) -> None:
        for stage in self.layers:
            if isinstance(stage.blocks, StepsNet):
                stage.blocks.grad_checkpointing = enable
            elif isinstance(stage.blocks, nn.Sequential):
                stage.grad_checkpointing = enable


# ---------------------------------------------------------------------------------------------- ResNet
class StepsResNet(ResNet):
    """Steps-ResNet: timm's ResNet where, in selected stages, the blocks after the first (stride-2,
    projection-shortcut) block form a StepsNet (Table 12). The stage width is kept even when the widest
    step is empty (its slice bypasses all blocks; Table 12's "×0" steps).

    Args:
        block: ``BasicBlock`` or ``Bottleneck``.
        layers: baseline blocks per stage (used for stages without steps).
        stage_steps: per stage, ``None`` or ``((width, depth), ...)`` with ``width`` the bottleneck dimension
            as in Table 12 (a Bottleneck step runs at 4×width channels).
        drop_path_rate: max stochastic depth, linear over all blocks in forward order.
    """

    def __init__(
        self,
        block,
        layers: Sequence[int],
        stage_steps: Sequence[Optional[Sequence[Sequence[int]]]],
        channels: Sequence[int] = (64, 128, 256, 512),
        act_layer=nn.ReLU,
        norm_layer=nn.BatchNorm2d,
        drop_path_rate: float = 0.0,
        zero_init_last: bool = True,
        **kwargs,
    ):
        if len(stage_steps) != len(layers):
            raise ValueError(f"stage_steps needs one entry per stage ({len(layers)}), got {len(stage_steps)}")
        for s, steps in enumerate(stage_steps):
            if steps is None:
                continue
            if any(len(t) != 2 or t[0] <= 0 or t[1] < 0 for t in steps):
                raise ValueError(f"Steps-ResNet steps are (bottleneck width, depth) pairs, got {steps}")
            if steps[-1][0] != channels[s]:  # the stage width is kept (Table 12), so the widest step must span it
                raise ValueError(
                    f"Steps-ResNet stage {s + 1}: the widest step must be the stage width "
                    f"{channels[s]} (Table 12 widths, possibly ×0), got {steps[-1][0]}"
                )
        super().__init__(
            block=block,
            layers=[n if s is None else 1 for n, s in zip(layers, stage_steps)],
            channels=channels,
            act_layer=act_layer,
            norm_layer=norm_layer,
            drop_path_rate=0.0,
            zero_init_last=zero_init_last,
            **kwargs,
        )
        # the arguments timm's make_blocks gives every block, so the step blocks match the baseline's
        block_kwargs = dict(
            cardinality=kwargs.get("cardinality", 1),
            base_width=kwargs.get("base_width", 64),
            reduce_first=kwargs.get("block_reduce_first", 1),
            aa_layer=kwargs.get("aa_layer"),
            act_layer=get_act_layer(act_layer),
            norm_layer=get_norm_layer(norm_layer),
            device=kwargs.get("device"),
            dtype=kwargs.get("dtype"),
            **(kwargs.get("block_args") or {}),
        )
        e = block.expansion
        for s, steps in enumerate(stage_steps):
            if steps is None:
                continue

            def make_block(i, j, width):
                return block(width, width // e, **block_kwargs)

            getattr(self, f"layer{s + 1}").append(
                StepsNet(
                    [int(w) * e for w, _ in steps],
                    [int(d) for _, d in steps],
                    make_block,
                    in_width=channels[s] * e,
                    channel_dim=1,
                )
            )
        _set_drop_path(residual_blocks(self), drop_path_rate)
        self.init_weights(zero_init_last=zero_init_last)


# ------------------------------------------------------------------------------------- language model
def _rotate(x: torch.Tensor, base: float) -> torch.Tensor:
    """Rotary position embedding (half-split convention) over the last dim of ``(B, H, T, D)``."""
    half = x.shape[-1] // 2
    inv_freq = base ** (-torch.arange(half, device=x.device, dtype=torch.float32) / half)
    angle = torch.arange(x.shape[-2], device=x.device, dtype=torch.float32)[:, None] * inv_freq[None]
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class CausalSelfAttention(nn.Module):
    def __init__(
        self, dim: int, num_heads: int, rope_base: float = 10000.0, attn_drop: float = 0.0, device=None, dtype=None
    ):
        super().__init__()
        if dim % num_heads or (dim // num_heads) % 2:
            raise ValueError(f"width {dim} with {num_heads} heads needs an even head dim for rotary embeddings")
        self.num_heads, self.rope_base, self.attn_drop = num_heads, rope_base, attn_drop
        self.qkv = nn.Linear(dim, 3 * dim, bias=False, device=device, dtype=dtype)
        self.proj = nn.Linear(dim, dim, bias=False, device=device, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k = _rotate(q, self.rope_base), _rotate(k, self.rope_base)
        out = F.scaled_dot_product_attention(
            q, k, v, is_causal=True, dropout_p=self.attn_drop if self.training else 0.0
        )
        return self.proj(out.transpose(1, 2).reshape(B, T, C))


class DecoderBlock(nn.Module):
    """LLaMA-style pre-norm decoder block: RMSNorm → causal attention (RoPE) → RMSNorm → SwiGLU."""

    def __init__(
        self,
        dim: int,
        num_heads: int,
        mlp_ratio: float = 8 / 3,
        drop: float = 0.0,
        drop_path: float = 0.0,
        device=None,
        dtype=None,
    ):
        super().__init__()
        dd = dict(device=device, dtype=dtype)
        self.norm1 = RmsNorm(dim, **dd)
        self.attn = CausalSelfAttention(dim, num_heads, **dd)
        self.norm2 = RmsNorm(dim, **dd)
        self.mlp = SwiGLU(dim, int(dim * mlp_ratio), bias=False, drop=drop, **dd)
        self.drop_path = DropPath(drop_path) if drop_path > 0 else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dp = self.drop_path or (lambda t: t)
        x = x + dp(self.attn(self.norm1(x)))
        return x + dp(self.mlp(self.norm2(x)))


class TransformerLM(nn.Module):
    """Decoder-only language model of Table 4 with a StepsNet trunk (1 step = the plain Transformer).

    Token embedding → StepsNet of DecoderBlocks → RMSNorm → LM head (tied to the embedding).
    [ASSUMED, docs/stepsnet.md; Table 4 gives only #Params/#Blocks/#Layers]: LLaMA-style blocks, SwiGLU hidden
    ``int(8d/3)``, tied embeddings, no biases, ``vocab_size`` 50,000 (the paper's "vocabulary of size 50K"),
    sequence length 128. With these, all six Table 4 parameter counts round to the printed values.

    Args:
        steps: ``((width, heads, depth), ...)`` narrow to wide; the widest is the model width.
    """

    def __init__(
        self,
        steps: Sequence[Sequence[int]],
        vocab_size: int = 50_000,
        mlp_ratio: float = 8 / 3,
        seq_len: int = 128,
        drop_rate: float = 0.0,
        drop_path_rate: float = 0.0,
        tie_embeddings: bool = True,
        device=None,
        dtype=None,
        **kwargs,
    ):
        super().__init__()
        kwargs = {k: v for k, v in kwargs.items() if k not in ("num_classes", "in_chans", "global_pool")}
        if kwargs:
            raise TypeError(f"TransformerLM got unexpected arguments {sorted(kwargs)}")
        _check_steps(steps, "Steps-Transformer")
        widths, heads, depths = zip(*[tuple(int(v) for v in s) for s in steps])
        self.vocab_size, self.seq_len, self.embed_dim = vocab_size, seq_len, widths[-1]
        dd = dict(device=device, dtype=dtype)
        self.tok_embed = nn.Embedding(vocab_size, widths[-1], **dd)
        self.drop = nn.Dropout(drop_rate)
        self.blocks = StepsNet(
            widths, depths, lambda i, j, w: DecoderBlock(w, heads[i], mlp_ratio=mlp_ratio, drop=drop_rate, **dd)
        )
        _set_drop_path(list(self.blocks), drop_path_rate)
        self.norm = RmsNorm(widths[-1], **dd)
        self.lm_head = nn.Linear(widths[-1], vocab_size, bias=False, **dd)
        if tie_embeddings:
            self.lm_head.weight = self.tok_embed.weight
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        elif isinstance(m, RmsNorm):
            nn.init.ones_(m.weight)

    def example_inputs(self, input_size=None, batch_size: int = 1) -> tuple:
        """Token ids for one forward pass; ``input_size`` is the sequence length (int or its last element)."""
        seq = self.seq_len if input_size is None else int(input_size if isinstance(input_size, int) else input_size[-1])
        device = self.tok_embed.weight.device
        if device.type == "meta":
            return (torch.zeros(batch_size, seq, dtype=torch.long, device=device),)
        return (torch.randint(0, self.vocab_size, (batch_size, seq), device=device),)

    def count_layers(self) -> int:
        """Table 4's rule: 5 per block (SwiGLU counts as 2) + the LM head; the embedding lookup is not a layer."""
        return 5 * len(self.blocks) + 1

    def forward_features(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.norm(self.blocks(self.drop(self.tok_embed(tokens))))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.forward_features(tokens))


# ----------------------------------------------------------------------------------------- builders
def _cfg(**kwargs):
    return {
        "num_classes": 1000,
        "input_size": (3, 224, 224),
        "pool_size": None,
        "crop_pct": 0.875,
        "interpolation": "bicubic",
        "fixed_input_size": True,
        "mean": IMAGENET_DEFAULT_MEAN,
        "std": IMAGENET_DEFAULT_STD,
        "license": "apache-2.0",
        **kwargs,
    }


def _deit_cfg(**kwargs):
    return _cfg(first_conv="patch_embed.proj", classifier="head", **kwargs)


def _swin_cfg(**kwargs):
    return _cfg(first_conv="patch_embed.proj", classifier="head.fc", pool_size=(7, 7), **kwargs)


def _resnet_cfg(**kwargs):
    return _cfg(
        first_conv="conv1",
        classifier="fc",
        fixed_input_size=False,
        interpolation="bilinear",
        pool_size=(7, 7),
        **kwargs,
    )


def _lm_cfg(**kwargs):
    return {"num_classes": 0, "input_size": (128,), "license": "apache-2.0", **kwargs}


# Table 5(a): 7 steps at 136·2^((i-5)/2) with the halving allocation (2k, k, ..., k) [DERIVED, docs/stepsnet.md]
_W136_WIDTHS = (34, 48, 68, 96, 136, 192, 272)
_W136_HEADS = (1, 1, 1, 2, 2, 3, 4)  # head dim ≈ 64 as DeiT's [ASSUMED]
_W136_ALLOC = {
    24: (6, 3, 3, 3, 3, 3, 3),
    36: (9, 4, 5, 4, 5, 4, 5),
    48: (12, 6, 6, 6, 6, 6, 6),
    72: (18, 9, 9, 9, 9, 9, 9),
    96: (24, 12, 12, 12, 12, 12, 12),
}

_STEPS_DEIT_S = ((192, 3), (272, 4), (384, 6))
_TABLE9 = ((0, 0, 12), (2, 1, 11), (6, 3, 9), (12, 6, 6), (18, 9, 3), (22, 11, 1))
_TABLE8 = {
    1: ((384, 6, 12),),
    2: ((272, 4, 12), (384, 6, 6)),
    3: ((192, 3, 12), (272, 4, 6), (384, 6, 6)),
    4: ((136, 2, 12), (192, 3, 6), (272, 4, 6), (384, 6, 6)),
    5: ((96, 2, 12), (136, 2, 6), (192, 3, 6), (272, 4, 6), (384, 6, 6)),
}

_SWIN_T = dict(embed_dim=96, depths=(2, 2, 6, 2), num_heads=(3, 6, 12, 24))
_SWIN_S = dict(embed_dim=96, depths=(2, 2, 18, 2), num_heads=(3, 6, 12, 24))
_SWIN_B = dict(embed_dim=128, depths=(2, 2, 18, 2), num_heads=(4, 8, 16, 32))
_STEPS_SWIN_TS_STAGE4 = ((192, 6, 4), (272, 8, 2), (384, 12, 2), (544, 16, 2), (768, 24, 0))
_STEPS_SWIN_T_STAGE3 = ((192, 6, 6), (272, 8, 3), (384, 12, 3))
_STEPS_SWIN_S_STAGE3 = ((192, 6, 6), (272, 8, 3), (384, 12, 15))
_STEPS_SWIN_B_STAGE3 = ((256, 8, 6), (360, 12, 3), (512, 16, 15))
_STEPS_SWIN_B_STAGE4 = ((256, 8, 4), (360, 12, 2), (512, 16, 2), (720, 24, 2), (1024, 32, 0))

# Table 5(b) baselines [DERIVED, docs/stepsnet.md]: m·[2,2,18,2]-style depths at base width ≈ 96/√m
_SWIN_FIXFLOPS = {24: (68, (2, 2, 18, 2)), 48: (48, (4, 4, 36, 4)), 72: (39, (6, 6, 54, 6)), 96: (34, (8, 8, 72, 8))}

# Table 12 (bottleneck dims; the first, downsample block of each stage is not listed)
_STEPS_R18 = (
    None,
    None,
    ((64, 2), (90, 1), (128, 1), (181, 1), (256, 0)),
    ((64, 2), (90, 1), (128, 1), (181, 1), (256, 1), (362, 1), (512, 0)),
)
# Steps-ResNet-18 at half width (not a paper model): stage widths 32/64/128/256 and Table 12's step widths halved
# (45/90/181 for 90/181/362, rounded down), the same depths; the backbone of the embedded downstream presets
_STEPS_R18_W32 = (
    None,
    None,
    ((32, 2), (45, 1), (64, 1), (90, 1), (128, 0)),
    ((32, 2), (45, 1), (64, 1), (90, 1), (128, 1), (181, 1), (256, 0)),
)
_STEPS_R34 = (
    None,
    None,
    ((64, 6), (90, 3), (128, 3), (181, 3), (256, 2)),
    ((64, 2), (90, 1), (128, 1), (181, 1), (256, 1), (362, 1), (512, 1)),
)

# Table 4 [ASSUMED, docs/stepsnet.md]; 368 = 8 heads × 46 for 512/√2 (362, 360 and 368 all round 512/√2)
_LM = {
    "transformer_lm_30m": ((384, 6, 6),),
    "steps_lm_30m": ((192, 3, 6), (272, 4, 3), (384, 6, 3)),
    "transformer_lm_44m": ((512, 8, 6),),
    "steps_lm_45m": ((256, 4, 6), (368, 8, 3), (512, 8, 3)),
    "transformer_lm_63m": ((512, 8, 12),),
    "steps_lm_64m": ((256, 4, 12), (368, 8, 6), (512, 8, 6)),
}


def _swin_fixflops_heads(c0: int) -> tuple:
    h0 = max(1, round(c0 / 32))  # head dim ≈ 32-34 as Swin's [ASSUMED]
    return tuple(h0 * 2**i for i in range(4))


default_cfgs = generate_default_cfgs(
    {
        **{
            name: _resnet_cfg() for name in ("steps_resnet18", "steps_resnet18_w32", "steps_resnet34", "steps_resnet50")
        },
        **{
            name: _deit_cfg()
            for name in ("steps_deit_tiny", "steps_deit_small", "steps_deit_base", "steps_deit_base_302l")
        },
        **{f"steps_deit_small_n{n}": _deit_cfg() for n in _TABLE8},
        **{f"steps_deit_small_d{a}_{b}_{c}": _deit_cfg() for a, b, c in _TABLE9},
        **{f"deit_w136_d{d}": _deit_cfg() for d in _W136_ALLOC},
        **{f"steps_deit_w136_d{d}": _deit_cfg() for d in _W136_ALLOC},
        **{
            name: _swin_cfg()
            for name in (
                "steps_swin_tiny",
                "steps_swin_small",
                "steps_swin_base",
                "steps_swin_tiny_reverse",
                "steps_swin_fixflops_d14",
            )
        },
        **{f"steps_swin_tiny_stage{s}": _swin_cfg() for s in range(1, 5)},
        **{f"swin_fixflops_d{d}": _swin_cfg() for d in _SWIN_FIXFLOPS},
        **{name: _lm_cfg() for name in _LM},
    }
)


def _create_steps_deit(variant: str, pretrained: bool = False, **kwargs) -> StepsVisionTransformer:
    out_indices = kwargs.pop('out_indices', 3)  # timm's ViT default: the last 3 blocks
    return build_model_with_cfg(
        StepsVisionTransformer,
        variant,
        pretrained,
        feature_cfg=dict(out_indices=out_indices, feature_cls='getter'),
        **kwargs,
    )


def _create_vit(variant: str, pretrained: bool = False, **kwargs) -> VisionTransformer:
    skip = _on_meta() and "weight_init" not in kwargs
    model = build_model_with_cfg(
        VisionTransformer, variant, pretrained, **dict(kwargs, **({"weight_init": "skip"} if skip else {}))
    )
    if skip:
        model.weight_init_mode = ''  # a later init_weights() is timm's default init
    return model


def _create_steps_swin(variant: str, pretrained: bool = False, **kwargs) -> StepsSwinTransformer:
    return build_model_with_cfg(
        StepsSwinTransformer,
        variant,
        pretrained,
        feature_cfg=dict(flatten_sequential=True, out_indices=(0, 1, 2, 3)),
        **kwargs,
    )


def _create_swin(variant: str, pretrained: bool = False, **kwargs) -> SwinTransformer:
    skip = _on_meta() and "weight_init" not in kwargs
    model = build_model_with_cfg(
        SwinTransformer,
        variant,
        pretrained,
        feature_cfg=dict(flatten_sequential=True, out_indices=(0, 1, 2, 3)),
        **dict(kwargs, **({"weight_init": "skip"} if skip else {})),
    )
    if skip:
        model.weight_init_mode = ''
    return model


def _create_steps_resnet(variant: str, pretrained: bool = False, **kwargs) -> StepsResNet:
    return build_model_with_cfg(StepsResNet, variant, pretrained, **kwargs)


def _create_lm(variant: str, pretrained: bool = False, **kwargs) -> TransformerLM:
    # Not build_model_with_cfg: timm's builder reads the cfg as an image's (C, H, W) (it asserts a 3-element
    # input_size to derive in_chans/img_size); a language model's input is a token sequence, (seq_len,).
    if pretrained:
        raise ValueError(f"{variant} has no pretrained weights; build it with pretrained=False")
    for key in ("pretrained_cfg", "pretrained_cfg_overlay", "cache_dir"):
        kwargs.pop(key, None)
    model = TransformerLM(**dict(dict(steps=_LM[variant]), **kwargs))
    model.pretrained_cfg = model.default_cfg = default_cfgs[variant].default.to_dict()
    return model


def _steps_deit(variant, steps, pretrained, kwargs):
    return _create_steps_deit(variant, pretrained, **dict(dict(patch_size=16, steps=steps), **kwargs))


# ------------------------------------------------------------------------------------ Table 1 / 12-14
@register_model
def steps_resnet18(pretrained=False, **kwargs) -> StepsResNet:
    """Steps-ResNet-18 (Table 12): 18 blocks / 38 layers / 11.7M / 1.8G; empty widest steps keep 256/512 wide."""
    args = dict(block=BasicBlock, layers=(2, 2, 2, 2), stage_steps=_STEPS_R18)
    return _create_steps_resnet("steps_resnet18", pretrained, **dict(args, **kwargs))


@register_model
def steps_resnet18_w32(pretrained=False, **kwargs) -> StepsResNet:
    """Steps-ResNet-18 at half width (stage widths 32/64/128/256, Table 12's steps halved; not a paper model):
    the backbone of the embedded detection/segmentation presets and of the digits demo that pretrains it."""
    args = dict(block=BasicBlock, layers=(2, 2, 2, 2), channels=(32, 64, 128, 256), stage_steps=_STEPS_R18_W32)
    return _create_steps_resnet("steps_resnet18_w32", pretrained, **dict(args, **kwargs))


@register_model
def steps_resnet34(pretrained=False, **kwargs) -> StepsResNet:
    """Steps-ResNet-34 (Table 12, stages 1-2 as ResNet-34: a transcription fix, docs/stepsnet.md): 34 blocks."""
    args = dict(block=BasicBlock, layers=(3, 4, 6, 3), stage_steps=_STEPS_R34)
    return _create_steps_resnet("steps_resnet34", pretrained, **dict(args, **kwargs))


@register_model
def steps_resnet50(pretrained=False, **kwargs) -> StepsResNet:
    """Steps-ResNet-50: Steps-ResNet-34's steps with Bottleneck blocks (block width 4× the listed dims)."""
    args = dict(block=Bottleneck, layers=(3, 4, 6, 3), stage_steps=_STEPS_R34)
    return _create_steps_resnet("steps_resnet50", pretrained, **dict(args, **kwargs))


@register_model
def steps_deit_tiny(pretrained=False, **kwargs) -> StepsVisionTransformer:
    """Steps-DeiT-T (Table 13): [96,2]×12, [136,2]×6, [192,3]×6."""
    return _steps_deit("steps_deit_tiny", ((96, 2, 12), (136, 2, 6), (192, 3, 6)), pretrained, kwargs)


@register_model
def steps_deit_small(pretrained=False, **kwargs) -> StepsVisionTransformer:
    """Steps-DeiT-S (Table 13): [192,3]×12, [272,4]×6, [384,6]×6."""
    return _steps_deit("steps_deit_small", _TABLE8[3], pretrained, kwargs)


@register_model
def steps_deit_base(pretrained=False, **kwargs) -> StepsVisionTransformer:
    """Steps-DeiT-B of Table 1 (24 blocks, 86.7M, 17.9G): [384,6]×12, [544,8]×6, [768,12]×6 [DERIVED]."""
    return _steps_deit("steps_deit_base", ((384, 6, 12), (544, 8, 6), (768, 12, 6)), pretrained, kwargs)


@register_model
def steps_deit_base_302l(pretrained=False, **kwargs) -> StepsVisionTransformer:
    """Steps-DeiT-B of Table 13 and the text ("302-layer"): 5 steps 96→384, 12 blocks each (≈42.1M, ≈9.2G)."""
    steps = ((96, 2, 12), (136, 2, 12), (192, 3, 12), (272, 4, 12), (384, 6, 12))
    return _steps_deit("steps_deit_base_302l", steps, pretrained, kwargs)


@register_model
def steps_swin_tiny(pretrained=False, **kwargs) -> StepsSwinTransformer:
    """Steps-Swin-T (Table 14): StepsNet in stages 3 and 4; stage 4 runs at 544 channels."""
    args = dict(_SWIN_T, window_size=7, stage_steps=(None, None, _STEPS_SWIN_T_STAGE3, _STEPS_SWIN_TS_STAGE4))
    return _create_steps_swin("steps_swin_tiny", pretrained, **dict(args, **kwargs))


@register_model
def steps_swin_small(pretrained=False, **kwargs) -> StepsSwinTransformer:
    """Steps-Swin-S (Table 14): stage 3 [192,6]×6, [272,8]×3, [384,12]×15; stage 4 as Steps-Swin-T."""
    args = dict(_SWIN_S, window_size=7, stage_steps=(None, None, _STEPS_SWIN_S_STAGE3, _STEPS_SWIN_TS_STAGE4))
    return _create_steps_swin("steps_swin_small", pretrained, **dict(args, **kwargs))


@register_model
def steps_swin_base(pretrained=False, **kwargs) -> StepsSwinTransformer:
    """Steps-Swin-B (Table 14, stage 4's widest step ×0, a transcription fix); stage 4 runs at 720 channels."""
    args = dict(_SWIN_B, window_size=7, stage_steps=(None, None, _STEPS_SWIN_B_STAGE3, _STEPS_SWIN_B_STAGE4))
    return _create_steps_swin("steps_swin_base", pretrained, **dict(args, **kwargs))


# ------------------------------------------------------------------------------------------- Table 4
@register_model
def transformer_lm_30m(pretrained=False, **kwargs) -> TransformerLM:
    """Transformer baseline of Table 4: d=384, 6 blocks."""
    return _create_lm("transformer_lm_30m", pretrained, **kwargs)


@register_model
def steps_lm_30m(pretrained=False, **kwargs) -> TransformerLM:
    """Steps-Transformer of Table 4 (30M): [192]×6, [272]×3, [384]×3."""
    return _create_lm("steps_lm_30m", pretrained, **kwargs)


@register_model
def transformer_lm_44m(pretrained=False, **kwargs) -> TransformerLM:
    """Transformer baseline of Table 4: d=512, 6 blocks."""
    return _create_lm("transformer_lm_44m", pretrained, **kwargs)


@register_model
def steps_lm_45m(pretrained=False, **kwargs) -> TransformerLM:
    """Steps-Transformer of Table 4 (45M): [256]×6, [368]×3, [512]×3."""
    return _create_lm("steps_lm_45m", pretrained, **kwargs)


@register_model
def transformer_lm_63m(pretrained=False, **kwargs) -> TransformerLM:
    """Transformer baseline of Table 4: d=512, 12 blocks."""
    return _create_lm("transformer_lm_63m", pretrained, **kwargs)


@register_model
def steps_lm_64m(pretrained=False, **kwargs) -> TransformerLM:
    """Steps-Transformer of Table 4 (64M): [256]×12, [368]×6, [512]×6."""
    return _create_lm("steps_lm_64m", pretrained, **kwargs)


# ---------------------------------------------------------------------------------------- Table 5(a)
def _deit_w136(depth, pretrained, kwargs):
    """Fixed-width DeiT of Table 5(a): width 136, 2 heads [ASSUMED]."""
    args = dict(patch_size=16, embed_dim=136, depth=depth, num_heads=2)
    return _create_vit(f"deit_w136_d{depth}", pretrained, **dict(args, **kwargs))


def _steps_deit_w136(depth, pretrained, kwargs):
    """Steps-DeiT of Table 5(a): 7 steps 34…272 (full width 272) with (2k, k, …, k) blocks."""
    steps = tuple(zip(_W136_WIDTHS, _W136_HEADS, _W136_ALLOC[depth]))
    return _steps_deit(f"steps_deit_w136_d{depth}", steps, pretrained, kwargs)


@register_model
def deit_w136_d24(pretrained=False, **kwargs) -> VisionTransformer:
    """DeiT-122L (Table 5a, Fig. 1/2): timm ViT, width 136, 24 blocks."""
    return _deit_w136(24, pretrained, kwargs)


@register_model
def deit_w136_d36(pretrained=False, **kwargs) -> VisionTransformer:
    """DeiT-182L (Table 5a): width 136, 36 blocks."""
    return _deit_w136(36, pretrained, kwargs)


@register_model
def deit_w136_d48(pretrained=False, **kwargs) -> VisionTransformer:
    """DeiT-242L (Table 5a): width 136, 48 blocks."""
    return _deit_w136(48, pretrained, kwargs)


@register_model
def deit_w136_d72(pretrained=False, **kwargs) -> VisionTransformer:
    """DeiT-362L (Table 5a): width 136, 72 blocks."""
    return _deit_w136(72, pretrained, kwargs)


@register_model
def deit_w136_d96(pretrained=False, **kwargs) -> VisionTransformer:
    """DeiT-482L (Table 5a, Fig. 2): width 136, 96 blocks."""
    return _deit_w136(96, pretrained, kwargs)


@register_model
def steps_deit_w136_d24(pretrained=False, **kwargs) -> StepsVisionTransformer:
    """Steps-DeiT-122L (Table 5a): (6, 3, 3, 3, 3, 3, 3) blocks at 34…272."""
    return _steps_deit_w136(24, pretrained, kwargs)


@register_model
def steps_deit_w136_d36(pretrained=False, **kwargs) -> StepsVisionTransformer:
    """Steps-DeiT-182L (Table 5a). The paper's allocation is unknown; (9,4,5,4,5,4,5) is the nearest to the
    halving rule [ASSUMED] (8.86M / 1.99G against the printed 8.8M / 2.0G)."""
    return _steps_deit_w136(36, pretrained, kwargs)


@register_model
def steps_deit_w136_d48(pretrained=False, **kwargs) -> StepsVisionTransformer:
    """Steps-DeiT-242L (Table 5a): (12, 6, …, 6)."""
    return _steps_deit_w136(48, pretrained, kwargs)


@register_model
def steps_deit_w136_d72(pretrained=False, **kwargs) -> StepsVisionTransformer:
    """Steps-DeiT-362L (Table 5a): (18, 9, …, 9)."""
    return _steps_deit_w136(72, pretrained, kwargs)


@register_model
def steps_deit_w136_d96(pretrained=False, **kwargs) -> StepsVisionTransformer:
    """Steps-DeiT-482L (Table 5a, Fig. 2): (24, 12, …, 12)."""
    return _steps_deit_w136(96, pretrained, kwargs)


# ---------------------------------------------------------------------------------------- Table 5(b)
def _swin_fixflops(blocks, pretrained, kwargs):
    c0, depths = _SWIN_FIXFLOPS[blocks]
    args = dict(patch_size=4, window_size=7, embed_dim=c0, depths=depths, num_heads=_swin_fixflops_heads(c0))
    return _create_swin(f"swin_fixflops_d{blocks}", pretrained, **dict(args, **kwargs))


@register_model
def swin_fixflops_d24(pretrained=False, **kwargs) -> SwinTransformer:
    """Swin at Swin-T FLOPs with 24 blocks (Table 5b): C0=68, depths (2,2,18,2) [DERIVED]."""
    return _swin_fixflops(24, pretrained, kwargs)


@register_model
def swin_fixflops_d48(pretrained=False, **kwargs) -> SwinTransformer:
    """Swin at Swin-T FLOPs with 48 blocks (Table 5b): C0=48, depths (4,4,36,4) [DERIVED]."""
    return _swin_fixflops(48, pretrained, kwargs)


@register_model
def swin_fixflops_d72(pretrained=False, **kwargs) -> SwinTransformer:
    """Swin at Swin-T FLOPs with 72 blocks (Table 5b): C0=39, depths (6,6,54,6) [DERIVED]."""
    return _swin_fixflops(72, pretrained, kwargs)


@register_model
def swin_fixflops_d96(pretrained=False, **kwargs) -> SwinTransformer:
    """Swin at Swin-T FLOPs with 96 blocks (Table 5b): C0=34, depths (8,8,72,8) [DERIVED]."""
    return _swin_fixflops(96, pretrained, kwargs)


@register_model
def steps_swin_fixflops_d14(pretrained=False, **kwargs) -> StepsSwinTransformer:
    """Steps-Swin with 14 blocks (Table 5b): Swin-T with stage 4 = [544,16]×4, [768,24]×0 [DERIVED]."""
    args = dict(_SWIN_T, window_size=7, stage_steps=(None, None, None, ((544, 16, 4), (768, 24, 0))))
    return _create_steps_swin("steps_swin_fixflops_d14", pretrained, **dict(args, **kwargs))


# ------------------------------------------------------------------------------------- Tables 8 / 9
def _table8(n, pretrained, kwargs):
    return _steps_deit(f"steps_deit_small_n{n}", _TABLE8[n], pretrained, kwargs)


@register_model
def steps_deit_small_n1(pretrained=False, **kwargs) -> StepsVisionTransformer:
    """Table 8, 1 step: DeiT-S written as a 1-step StepsNet."""
    return _table8(1, pretrained, kwargs)


@register_model
def steps_deit_small_n2(pretrained=False, **kwargs) -> StepsVisionTransformer:
    """Table 8, 2 steps: [272,4]×12, [384,6]×6."""
    return _table8(2, pretrained, kwargs)


@register_model
def steps_deit_small_n3(pretrained=False, **kwargs) -> StepsVisionTransformer:
    """Table 8, 3 steps (= steps_deit_small)."""
    return _table8(3, pretrained, kwargs)


@register_model
def steps_deit_small_n4(pretrained=False, **kwargs) -> StepsVisionTransformer:
    """Table 8, 4 steps: [136,2]×12, [192,3]×6, [272,4]×6, [384,6]×6."""
    return _table8(4, pretrained, kwargs)


@register_model
def steps_deit_small_n5(pretrained=False, **kwargs) -> StepsVisionTransformer:
    """Table 8, 5 steps: [96,2]×12, [136,2]×6, [192,3]×6, [272,4]×6, [384,6]×6."""
    return _table8(5, pretrained, kwargs)


def _table9(depths, pretrained, kwargs):
    steps = tuple((w, h, d) for (w, h), d in zip(_STEPS_DEIT_S, depths))
    return _steps_deit("steps_deit_small_d{}_{}_{}".format(*depths), steps, pretrained, kwargs)


@register_model
def steps_deit_small_d0_0_12(pretrained=False, **kwargs) -> StepsVisionTransformer:
    """Table 9 allocation (0, 0, 12) at widths (192, 272, 384): equals DeiT-S."""
    return _table9((0, 0, 12), pretrained, kwargs)


@register_model
def steps_deit_small_d2_1_11(pretrained=False, **kwargs) -> StepsVisionTransformer:
    """Table 9 allocation (2, 1, 11)."""
    return _table9((2, 1, 11), pretrained, kwargs)


@register_model
def steps_deit_small_d6_3_9(pretrained=False, **kwargs) -> StepsVisionTransformer:
    """Table 9 allocation (6, 3, 9)."""
    return _table9((6, 3, 9), pretrained, kwargs)


@register_model
def steps_deit_small_d12_6_6(pretrained=False, **kwargs) -> StepsVisionTransformer:
    """Table 9 allocation (12, 6, 6) (= steps_deit_small)."""
    return _table9((12, 6, 6), pretrained, kwargs)


@register_model
def steps_deit_small_d18_9_3(pretrained=False, **kwargs) -> StepsVisionTransformer:
    """Table 9 allocation (18, 9, 3)."""
    return _table9((18, 9, 3), pretrained, kwargs)


@register_model
def steps_deit_small_d22_11_1(pretrained=False, **kwargs) -> StepsVisionTransformer:
    """Table 9 allocation (22, 11, 1)."""
    return _table9((22, 11, 1), pretrained, kwargs)


# ------------------------------------------------------------------------------------ Tables 10 / 11
@register_model
def steps_swin_tiny_reverse(pretrained=False, **kwargs) -> StepsSwinTransformer:
    """Table 10's reverse (wide-to-narrow) design on Steps-Swin-T: stage 3 384×3 → 272×3 → 192×6, stage 4
    544×2 → 384×2 → 272×2 → 192×4 at a 544-wide stage 4 [ASSUMED, docs/stepsnet.md]."""
    args = dict(
        _SWIN_T, window_size=7, reverse=True, stage_steps=(None, None, _STEPS_SWIN_T_STAGE3, _STEPS_SWIN_TS_STAGE4)
    )
    return _create_steps_swin("steps_swin_tiny_reverse", pretrained, **dict(args, **kwargs))


def _table11(stage, pretrained, kwargs):
    steps = {
        1: ((68, 2, 2), (96, 3, 1)),
        2: ((136, 4, 2), (192, 6, 1)),  # [ASSUMED] 2-step (2, 1), Table 11
        3: _STEPS_SWIN_T_STAGE3,
        4: _STEPS_SWIN_TS_STAGE4,
    }[stage]
    stage_steps = tuple(steps if s == stage else None for s in range(1, 5))
    args = dict(_SWIN_T, window_size=7, stage_steps=stage_steps)
    return _create_steps_swin(f"steps_swin_tiny_stage{stage}", pretrained, **dict(args, **kwargs))


@register_model
def steps_swin_tiny_stage1(pretrained=False, **kwargs) -> StepsSwinTransformer:
    """Table 11: StepsNet in stage 1 of Swin-T only ([68,2]×2, [96,3]×1 [ASSUMED])."""
    return _table11(1, pretrained, kwargs)


@register_model
def steps_swin_tiny_stage2(pretrained=False, **kwargs) -> StepsSwinTransformer:
    """Table 11: StepsNet in stage 2 of Swin-T only ([136,4]×2, [192,6]×1 [ASSUMED])."""
    return _table11(2, pretrained, kwargs)


@register_model
def steps_swin_tiny_stage3(pretrained=False, **kwargs) -> StepsSwinTransformer:
    """Table 11: StepsNet in stage 3 of Swin-T only (as in Steps-Swin-T)."""
    return _table11(3, pretrained, kwargs)


@register_model
def steps_swin_tiny_stage4(pretrained=False, **kwargs) -> StepsSwinTransformer:
    """Table 11: StepsNet in stage 4 of Swin-T only (as in Steps-Swin-T, 544 wide)."""
    return _table11(4, pretrained, kwargs)
