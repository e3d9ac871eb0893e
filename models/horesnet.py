"""HO-ResNet: residual stacks wired as explicit Runge–Kutta steps.

Paper: Z. Luo, Z. Sun, W. Zhou, Z. Wu, S. Kamata, "Rethinking ResNets: Improved Stacking Strategies With High
Order Schemes", arXiv:2103.15244. Sections, equations and figures below are the paper's; what the paper leaves
open (marked [ASSUMED]) and what the official code does differently are in ``docs/horesnet.md``.

A plain ResNet block is one forward-Euler step x + F(x). HO-ResNet keeps the sub-block F (pre-activation
BN-ReLU-conv3x3-BN-ReLU-conv3x3, 64 channels) and the number of F in the network fixed, and only changes how
they are wired: s consecutive F become the s stages of one explicit Runge–Kutta (RK) step::

    k_1 = F_1(x)
    k_i = F_i(x + h * sum_{j<i} a_ij k_j)        i = 2..s   (each stage has its own weights)
    y   = ReLU(x + h * sum_i b_i k_i)                        (ReLU as in the official code, docs/horesnet.md)

Every scheme is therefore a Butcher tableau (A, b, c) — ``TABLEAUX`` / ``get_tableau(name)`` — driving one
generic block, ``RKBlock``. The nodes c are not used by the network (§2: the time dependence is carried by
the stages' distinct weights); they are kept for consistency checks (row sums of A equal c).

Schemes: ``euler`` (= ResNet), ``midpoint``, ``rk4``, ``verner`` (Verner 1978 8(9) pair, 8th-order weights,
truncated to the 14 stages they use, §2.4 and Fig. 7) from the paper; ``heun3``, ``rk3``, ``gill4``,
``kutta_nystrom5`` as extras. Options: ``rk4_output`` ("blend" | "k4_only" | "k4_sixth"), ``verner_coeffs``
("standard" | "official_code"), ``learnable_h`` (the paper's adaptive Verner: one scalar h per block).

Registered names: ``horesnet{L}_{scheme}`` for every depth/scheme of Tables 3–4 and Figs. 10–11, where
"ResNet-L" has L = 2·n_F + 2 weighted layers (stem conv + FC), plus ``horesnet{L}_verner_ada`` (learnable h)
and the extras at depths their stage count divides. ``num_classes`` (default 10) and ``in_chans`` (3) are
timm kwargs; the default input is 32×32.
"""

import math
import re
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from timm.layers import DropPath, create_classifier, get_device_dtype
from timm.models import build_model_with_cfg, generate_default_cfgs, register_model
from timm.models._features import feature_take_indices
from timm.models._manipulate import checkpoint_seq

__all__ = [
    "ButcherTableau",
    "TABLEAUX",
    "SCHEMES",
    "get_tableau",
    "register_tableau",
    "PreActSubBlock",
    "RKBlock",
    "HOResNet",
    "checkpoint_filter_fn",
    "subblocks_for_depth",
]

CIFAR10_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR10_STD = (0.2470, 0.2435, 0.2616)


# --------------------------------------------------------------------------------------------------------------
# Butcher tableaux
# --------------------------------------------------------------------------------------------------------------


def _rooted_trees(max_order: int) -> list[tuple[int, tuple]]:
    """All rooted trees with up to ``max_order`` nodes as (order, tree); a tree is the sorted tuple of its
    children. Counts per order are 1, 1, 2, 4, 9, 20, 48, 115, 286, ... (OEIS A000081)."""
    trees: list[tuple] = [()]
    order = {(): 1}
    for n in range(2, max_order + 1):
        found = []

        def extend(start: int, remaining: int, children: list):
            if remaining == 0:
                found.append(tuple(children))
                return
            for idx in range(start, len(trees)):  # non-decreasing index = each multiset of children once
                if order[trees[idx]] <= remaining:
                    extend(idx, remaining - order[trees[idx]], children + [trees[idx]])

        extend(0, n - 1, [])
        for t in found:
            order[t] = n
        trees += found
    return [(order[t], t) for t in trees]


@dataclass(frozen=True)
class ButcherTableau:
    """An explicit Runge–Kutta method: ``a[i]`` holds a_i1..a_i,i-1 (row 0 is empty), ``b`` the output weights,
    ``c`` the nodes, ``order`` the order the literature gives for it (``algebraic_order()`` recomputes it)."""

    name: str
    a: tuple[tuple[float, ...], ...]
    b: tuple[float, ...]
    c: tuple[float, ...]
    order: int
    reference: str = ""
    note: str = ""

    def __post_init__(self):
        s = len(self.b)
        if len(self.a) != s or len(self.c) != s:
            raise ValueError(
                f"tableau {self.name!r}: A needs {s} rows and c {s} entries to match b; got "
                f"{len(self.a)} rows and {len(self.c)} nodes"
            )
        bad = [i for i, row in enumerate(self.a) if len(row) != i]
        if bad:
            raise ValueError(
                f"tableau {self.name!r}: row i of A (0-based) must list the i coefficients a_i0..a_i,i-1 "
                f"of an explicit method; rows {bad} do not"
            )

    @property
    def stages(self) -> int:
        return len(self.b)

    def coefficient_errors(self) -> tuple[list[float], float]:
        """(row sum of A minus c, per stage; sum of b minus 1): all zero for a consistent method."""
        return [sum(row) - ci for row, ci in zip(self.a, self.c)], sum(self.b) - 1.0

    def is_consistent(self, tol: float = 1e-12) -> bool:
        rows, total = self.coefficient_errors()
        return all(abs(r) <= tol * max(1.0, abs(ci)) for r, ci in zip(rows, self.c)) and abs(total) <= tol

    def order_condition_residuals(self, max_order: int = 9) -> list[tuple[int, float]]:
        """(tree order, relative residual of b·Φ(t) = 1/γ(t)) for every rooted tree up to ``max_order``.

        Φ is built from A alone (its row sums stand in for c), so the result is what ``RKBlock`` computes.
        The residual is divided by Σ|b_i Φ_i(t)| + 1/γ(t), the size of the terms that cancel.
        """
        s = self.stages
        weights: dict[tuple, list[float]] = {}  # tree -> stage vector Φ(t)
        density: dict[tuple, int] = {}
        out = []
        for n, tree in _rooted_trees(max_order):
            phi = [1.0] * s
            gamma = n
            for child in tree:
                child_phi = weights[child]
                a_phi = [sum(self.a[i][j] * child_phi[j] for j in range(i)) for i in range(s)]
                phi = [p * q for p, q in zip(phi, a_phi)]
                gamma *= density[child]
            weights[tree], density[tree] = phi, gamma
            value = sum(bi * p for bi, p in zip(self.b, phi))
            scale = sum(abs(bi * p) for bi, p in zip(self.b, phi)) + 1.0 / gamma
            out.append((n, abs(value - 1.0 / gamma) / scale))
        return out

    def algebraic_order(self, max_order: int = 9, tol: float = 1e-10) -> int:
        """Largest p ≤ ``max_order`` such that every order condition up to p holds (B-series trees)."""
        failed = [n for n, r in self.order_condition_residuals(max_order) if r > tol]
        return min(failed) - 1 if failed else max_order

    def with_coefficient(self, row: int, col: int | None, value: float, name: str | None = None) -> "ButcherTableau":
        """A copy with a_{row,col} (or b_row when ``col`` is None) set to ``value``; c follows A's row sums."""
        a = [list(r) for r in self.a]
        b = list(self.b)
        if col is None:
            b[row] = value
        else:
            if not 0 <= col < row < self.stages:
                raise ValueError(f"a[{row}][{col}] is not below the diagonal of a {self.stages}-stage explicit tableau")
            a[row][col] = value
        c = [sum(r) for r in a]
        return ButcherTableau(
            name or f"{self.name}*",
            tuple(map(tuple, a)),
            tuple(b),
            tuple(c),
            self.order,
            self.reference,
            "modified copy",
        )


def _explicit(
    name: str,
    rows: Sequence[Sequence[float]],
    b: Sequence[float],
    c: Sequence[float],
    order: int,
    reference: str,
    note: str = "",
) -> ButcherTableau:
    """Build a tableau from the rows below the diagonal (stage 2..s), padding each with zeros."""
    s = len(b)
    a = [()] + [tuple(float(v) for v in row) + (0.0,) * (i + 1 - len(row)) for i, row in enumerate(rows)]
    if len(a) != s:
        raise ValueError(f"tableau {name!r}: {len(a)} stages in A but {s} weights in b")
    return ButcherTableau(name, tuple(a), tuple(map(float, b)), tuple(map(float, c)), order, reference, note)


_S6 = math.sqrt(6.0)
_S2 = math.sqrt(2.0)

# Verner (1978) 8(9) pair, stages 1..14 with the 8th-order weights (paper §2.4, eqs. (14)-(15), with its typos
# corrected from Verner 1978, docs/horesnet.md; c5..c7 involve √6).
_VERNER_ROWS = [
    [1 / 12],
    [1 / 27, 2 / 27],
    [1 / 24, 0, 3 / 24],
    [(4 + 94 * _S6) / 375, 0, -(282 + 252 * _S6) / 375, (328 + 208 * _S6) / 375],
    [(9 - _S6) / 150, 0, 0, (312 + 32 * _S6) / 1425, (69 + 29 * _S6) / 570],
    [
        (927 - 347 * _S6) / 1250,
        0,
        0,
        (-16248 + 7328 * _S6) / 9375,
        (-489 + 179 * _S6) / 3750,
        (14268 - 5798 * _S6) / 9375,
    ],
    [4 / 54, 0, 0, 0, 0, (16 - _S6) / 54, (16 + _S6) / 54],
    [38 / 512, 0, 0, 0, 0, (118 - 23 * _S6) / 512, (118 + 23 * _S6) / 512, -18 / 512],
    [11 / 144, 0, 0, 0, 0, (266 - _S6) / 864, (266 + _S6) / 864, -1 / 16, -8 / 27],
    [
        (5034 - 271 * _S6) / 61440,
        0,
        0,
        0,
        0,
        0,
        (7859 - 1626 * _S6) / 10240,
        (-2232 + 813 * _S6) / 20480,
        (-594 + 271 * _S6) / 960,
        (657 - 813 * _S6) / 5120,
    ],
    [
        (5996 - 3794 * _S6) / 405,
        0,
        0,
        0,
        0,
        (-4342 - 338 * _S6) / 9,
        (154922 - 40458 * _S6) / 135,
        (-4176 + 3794 * _S6) / 45,
        (-340864 + 242816 * _S6) / 405,
        (26304 - 15176 * _S6) / 45,
        -26624 / 81,
    ],
    [
        (3793 + 2168 * _S6) / 103680,
        0,
        0,
        0,
        0,
        (4042 + 2263 * _S6) / 13824,
        (-231278 + 40717 * _S6) / 69120,
        (7947 - 2168 * _S6) / 11520,
        (1048 - 542 * _S6) / 405,
        (-1383 + 542 * _S6) / 720,
        2624 / 1053,
        3 / 1664,
    ],
    [
        -137 / 1296,
        0,
        0,
        0,
        0,
        (5642 - 337 * _S6) / 864,
        (5642 + 337 * _S6) / 864,
        -299 / 48,
        184 / 81,
        -44 / 9,
        -5120 / 1053,
        -11 / 468,
        16 / 9,
    ],
]
_VERNER_B = [103 / 1680, 0, 0, 0, 0, 0, 0, -27 / 140, 76 / 105, -201 / 280, 1024 / 1365, 3 / 7280, 12 / 35, 9 / 280]
_VERNER_C = [
    0,
    1 / 12,
    1 / 9,
    1 / 6,
    (2 + 2 * _S6) / 15,
    (6 + _S6) / 15,
    (6 - _S6) / 15,
    2 / 3,
    1 / 2,
    1 / 3,
    1 / 4,
    4 / 3,
    5 / 6,
    1,
]


def _verner_official_code() -> ButcherTableau:
    """Verner as the official HO-ResNet code has it: the four deviations listed in docs/horesnet.md."""
    rows = [list(r) for r in _VERNER_ROWS]
    rows[6 - 2][0] = 8 / 150  # a61: 0.053333 in the code (standard (9-√6)/150 = 0.043670)
    rows[12 - 2][6] = (154922 - 40458) / 135  # a12,7 = 847.88: √6 dropped
    rows[12 - 2][9] = (26304 - 15176) * _S6 / 45  # a12,10 = 605.73: √6 on the wrong term
    b = list(_VERNER_B)
    b[8 - 1] = 27 / 140  # `outx -= -27/140.*k8` flips the sign of b8
    c = [sum(r) for r in [[]] + rows]  # keep c = row sums so only the weights differ from the code's values
    return _explicit(
        "verner_official_code",
        rows,
        b,
        c,
        0,
        "official HO-ResNet code (zlannnn/HO-ResNet)",
        "sensitivity ablation: not a convergent method (Σb = 1.3857, docs/horesnet.md)",
    )


TABLEAUX: dict[str, ButcherTableau] = {
    t.name: t
    for t in [
        _explicit("euler", [], [1], [0], 1, "forward Euler; ResNet block x + F(x)"),
        _explicit("midpoint", [[1 / 2]], [0, 1], [0, 1 / 2], 2, "explicit mid-point, paper eqs. (8)-(9)"),
        _explicit(
            "rk4",
            [[1 / 2], [0, 1 / 2], [0, 0, 1]],
            [1 / 6, 1 / 3, 1 / 3, 1 / 6],
            [0, 1 / 2, 1 / 2, 1],
            4,
            "classical Runge-Kutta, paper eqs. (10)-(11)",
        ),
        _explicit(
            "verner",
            _VERNER_ROWS,
            _VERNER_B,
            _VERNER_C,
            8,
            "J. H. Verner, SIAM J. Numer. Anal. 15(4):772-790, 1978; 8th-order weights, stages 15-16 dropped "
            "(paper eqs. (14)-(15))",
        ),
        _explicit("heun3", [[1 / 3], [0, 2 / 3]], [1 / 4, 0, 3 / 4], [0, 1 / 3, 2 / 3], 3, "Heun's third-order method"),
        _explicit("rk3", [[1 / 2], [-1, 2]], [1 / 6, 2 / 3, 1 / 6], [0, 1 / 2, 1], 3, "Kutta's third-order method"),
        _explicit(
            "gill4",
            [[1 / 2], [(_S2 - 1) / 2, (2 - _S2) / 2], [0, -_S2 / 2, 1 + _S2 / 2]],
            [1 / 6, (2 - _S2) / 6, (2 + _S2) / 6, 1 / 6],
            [0, 1 / 2, 1 / 2, 1],
            4,
            "Runge-Kutta-Gill (1951)",
        ),
        _explicit(
            "kutta_nystrom5",
            [
                [1 / 3],
                [4 / 25, 6 / 25],
                [1 / 4, -3, 15 / 4],
                [2 / 27, 10 / 9, -50 / 81, 8 / 81],
                [2 / 25, 12 / 25, 2 / 15, 8 / 75, 0],
            ],
            [23 / 192, 0, 125 / 192, 0, -27 / 64, 125 / 192],
            [0, 1 / 3, 2 / 5, 1, 2 / 3, 4 / 5],
            5,
            "Kutta's 6-stage fifth-order method as corrected by Nystrom (1925)",
        ),
        # Options of the paper's schemes (§2.3 and Table 2; docs/horesnet.md); not schemes of their own.
        _explicit(
            "rk4_k4_only",
            [[1 / 2], [0, 1 / 2], [0, 0, 1]],
            [0, 0, 0, 1],
            [0, 1 / 2, 1 / 2, 1],
            1,
            "paper §2.5 / Table 2 '(1x)' ablation: y = x + k4",
            "first order as an ODE solver",
        ),
        _explicit(
            "rk4_k4_sixth",
            [[1 / 2], [0, 1 / 2], [0, 0, 1]],
            [0, 0, 0, 1 / 6],
            [0, 1 / 2, 1 / 2, 1],
            0,
            "earliest official commit (2021-03-28): y = x + k4/6",
            "not consistent (Σb = 1/6)",
        ),
        _verner_official_code(),
    ]
}

SCHEMES = ("euler", "midpoint", "rk4", "verner", "heun3", "rk3", "gill4", "kutta_nystrom5")
_RK4_OUTPUTS = {"blend": "rk4", "k4_only": "rk4_k4_only", "k4_sixth": "rk4_k4_sixth"}
_VERNER_COEFFS = {"standard": "verner", "official_code": "verner_official_code"}


def get_tableau(
    name: str | ButcherTableau, rk4_output: str = "blend", verner_coeffs: str = "standard"
) -> ButcherTableau:
    """The tableau of scheme ``name`` (a key of ``TABLEAUX``), with the options applied.

    ``rk4_output`` applies to ``rk4`` only and ``verner_coeffs`` to ``verner`` only; a non-default option for
    another scheme is an error rather than silently ignored.
    """
    if isinstance(name, ButcherTableau):
        tableau = name
    elif name not in TABLEAUX:
        raise ValueError(
            f"unknown HO-ResNet scheme {name!r}; known: {', '.join(TABLEAUX)} "
            f"(or pass a ButcherTableau / register one with register_tableau)"
        )
    else:
        tableau = TABLEAUX[name]
    if rk4_output not in _RK4_OUTPUTS:
        raise ValueError(f"rk4_output must be one of {', '.join(_RK4_OUTPUTS)}, not {rk4_output!r}")
    if verner_coeffs not in _VERNER_COEFFS:
        raise ValueError(f"verner_coeffs must be one of {', '.join(_VERNER_COEFFS)}, not {verner_coeffs!r}")
    if rk4_output != "blend":
        if tableau.name != "rk4":
            raise ValueError(f"rk4_output={rk4_output!r} only applies to scheme 'rk4', not {tableau.name!r}")
        tableau = TABLEAUX[_RK4_OUTPUTS[rk4_output]]
    if verner_coeffs != "standard":
        if tableau.name != "verner":
            raise ValueError(f"verner_coeffs={verner_coeffs!r} only applies to scheme 'verner', not {tableau.name!r}")
        tableau = TABLEAUX[_VERNER_COEFFS[verner_coeffs]]
    return tableau


def register_tableau(tableau: ButcherTableau, check_order: bool = True) -> ButcherTableau:
    """Add a scheme to ``TABLEAUX`` so ``HOResNet(scheme=tableau.name)`` can use it.

    Refuses an inconsistent tableau (row sums of A ≠ c or Σb ≠ 1) and, with ``check_order``, one whose
    order conditions do not give the order it claims — the two mistakes a transcribed tableau usually has.
    """
    if tableau.name in TABLEAUX:
        raise ValueError(f"scheme {tableau.name!r} is already registered; pick another name")
    if not tableau.is_consistent():
        rows, total = tableau.coefficient_errors()
        raise ValueError(
            f"tableau {tableau.name!r} is inconsistent: row sums of A minus c = "
            f"{[round(r, 12) for r in rows]}, sum(b) - 1 = {total:.3g}; fix the coefficients"
        )
    if check_order:
        found = tableau.algebraic_order(max_order=tableau.order + 1)
        if found < tableau.order:
            raise ValueError(
                f"tableau {tableau.name!r} claims order {tableau.order} but satisfies the order "
                f"conditions only up to {found}; check the coefficients"
            )
    TABLEAUX[tableau.name] = tableau
    return tableau


# --------------------------------------------------------------------------------------------------------------
# Blocks
# --------------------------------------------------------------------------------------------------------------


def _conv3x3(in_chs: int, out_chs: int, stride: int = 1, device=None, dtype=None) -> nn.Conv2d:
    return nn.Conv2d(in_chs, out_chs, kernel_size=3, stride=stride, padding=1, bias=False, device=device, dtype=dtype)


class PreActSubBlock(nn.Module):
    """The sub-block F (§2, Figs. 5-6): BN-ReLU-conv3x3-BN-ReLU-conv3x3, bias-free (73,984 params at width 64)."""

    def __init__(self, channels: int = 64, device=None, dtype=None):
        super().__init__()
        dd = dict(device=device, dtype=dtype)
        self.bn1 = nn.BatchNorm2d(channels, **dd)
        self.conv1 = _conv3x3(channels, channels, **dd)
        self.bn2 = nn.BatchNorm2d(channels, **dd)
        self.conv2 = _conv3x3(channels, channels, **dd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # In-place ReLU on fresh BN outputs: BN's backward needs its input, not its output.
        x = self.conv1(F.relu(self.bn1(x), inplace=True))
        return self.conv2(F.relu(self.bn2(x), inplace=True))


class RKBlock(nn.Module):
    """One explicit Runge–Kutta step whose stages are independent sub-blocks (no weight sharing).

    Args:
        tableau: the scheme (``get_tableau(...)``); zero coefficients are skipped.
        make_stage: called once per stage with its index, returns that stage's F (a fresh module each time).
        h: step size; a constant unless ``learnable_h``, then the initial value of the block's one scalar
            parameter ``h`` (the paper's adaptive Verner, Fig. 7; init 1.0 is [ASSUMED], the paper gives none).
        learnable_h: make h a trainable scalar shared by all stages of this block (unconstrained, Fig. 7).
        post_relu: apply ReLU to the block output (official code; the paper's equations have none).
        drop_path: stochastic depth on the block's increment ``h * sum_i b_i k_i`` (timm's ``drop_path_rate``).

    Each k_j is released as soon as no later stage input needs it, and the output sum is accumulated as the
    stages finish, so RK4 keeps one extra map rather than four (the "could be optimised to one" of §2.5).
    """

    # attribute types for TorchScript (the nested lists may start with an empty one)
    _stage_terms: List[List[Tuple[int, float]]]
    _release_at: List[List[int]]
    _out_weight: List[float]
    _read_later: List[bool]
    _stage_runs: List[bool]
    learnable_h: torch.jit.Final[bool]  # a constant, so TorchScript and torch.fx see one branch per model

    def __init__(
        self,
        tableau: ButcherTableau,
        make_stage: Callable[[int], nn.Module],
        h: float = 1.0,
        learnable_h: bool = False,
        post_relu: bool = True,
        drop_path: float = 0.0,
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.tableau = tableau
        self.stages = nn.ModuleList(make_stage(i) for i in range(tableau.stages))
        self.num_run = tableau.stages  # stages that run; fewer after prune_intermediate_layers
        self.post_relu = post_relu
        self.drop_path = DropPath(drop_path) if drop_path > 0 else None
        self.learnable_h = learnable_h
        if learnable_h:
            self.h = nn.Parameter(torch.tensor(float(h), device=device, dtype=dtype))
        else:
            self.h = float(h)
        s = tableau.stages
        self._stage_terms = [[(j, a) for j, a in enumerate(tableau.a[i]) if a != 0.0] for i in range(s)]
        self._out_weight = [float(bi) for bi in tableau.b]
        last_use = [-1] * s  # last stage whose input reads k_j
        for i, terms in enumerate(self._stage_terms):
            for j, _ in terms:
                last_use[j] = i
        self._release_at = [[j for j in range(s) if last_use[j] == i] for i in range(s)]
        self._read_later = [last_use[j] > j for j in range(s)]
        self._stage_runs = [True] * s  # False: pruned away (see truncate)

    def _stage_value(self, x: torch.Tensor, ks: List[Optional[torch.Tensor]], i: int) -> torch.Tensor:
        """Input of stage ``i``: x + h · Σ_j a_ij k_j, folding a constant h into the coefficients."""
        terms = self._stage_terms[i]
        if len(terms) == 0:
            return x
        if self.learnable_h:
            acc: Optional[torch.Tensor] = None
            for j, coef in terms:
                k = ks[j]
                assert k is not None
                acc = k * coef if acc is None else torch.add(acc, k, alpha=coef)
            assert acc is not None
            return torch.addcmul(x, self.h, acc)
        out = x
        for j, coef in terms:
            k = ks[j]
            assert k is not None
            out = torch.add(out, k, alpha=coef * self.h)
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_stages(x)[0]

    def forward_stages(
        self, x: torch.Tensor, take_indices: Optional[List[int]] = None, stop_index: int = -1
    ) -> Tuple[torch.Tensor, List[torch.Tensor]]:
        """The block output and the states after the stages in ``take_indices``: after stage i < s-1 the state
        is the next stage's input x + h·Σ_j a_{i+1,j} k_j (the RK stage value), after the last the block output.
        With ``stop_index`` >= 0 (or after pruning) the later stages do not run and the output is that state.
        Control flow depends on the tableau (Python numbers) only, so TorchScript and torch.fx follow it."""
        take = take_indices if take_indices is not None else [-2]
        last = self.num_run - 1 if stop_index < 0 else min(stop_index, self.num_run - 1)
        states: List[torch.Tensor] = []
        ks: List[Optional[torch.Tensor]] = [None for _ in range(len(self.stages))]
        acc: Optional[torch.Tensor] = None  # Σ b_i k_i so far (learnable h / drop path) or x + h Σ b_i k_i
        stopped: Optional[torch.Tensor] = None
        for i, stage in enumerate(self.stages):
            if i <= last + 1:
                stage_input = self._stage_value(x, ks, i)
                if i - 1 in take:
                    states.append(stage_input)
                if i == last + 1:  # stopped: the output is the input the next stage would get
                    stopped = stage_input
                elif self._stage_runs[i]:
                    for j in self._release_at[i]:
                        ks[j] = None
                    k = stage(stage_input)
                    stage_input = x  # drop the reference now (TorchScript has no `del` here): frees the map early
                    b = self._out_weight[i]
                    if b != 0.0:
                        if self.learnable_h:
                            acc = k * b if acc is None else torch.add(acc, k, alpha=b)
                        elif self.drop_path is not None:
                            acc = k * (b * self.h) if acc is None else torch.add(acc, k, alpha=b * self.h)
                        else:
                            acc = torch.add(x if acc is None else acc, k, alpha=b * self.h)
                    if self._read_later[i]:
                        ks[i] = k
                    k = x
        if stopped is not None:
            return stopped, states
        if acc is None:  # no output weight at all: y = x (only a custom tableau can do this)
            out = x
        elif self.drop_path is not None:
            out = x + self.drop_path(acc * self.h if self.learnable_h else acc)
        elif self.learnable_h:
            out = torch.addcmul(x, self.h, acc)
        else:
            out = acc
        if self.post_relu:
            out = F.relu(out, inplace=acc is not None)  # `out` is a fresh sum; never modify the block input
        if len(self.stages) - 1 in take:
            states.append(out)
        return out, states

    def truncate(self, num_stages: int) -> None:
        """Run only the first ``num_stages`` stages (timm's ``prune_intermediate_layers``); the block then
        outputs the next stage's input. The dropped stages become ``nn.Identity`` (no parameters), and so does a
        kept stage whose k no kept stage value reads (a zero column below it: Kutta–Nyström's a_54 = 0), since
        only the final sum used it — timm's contract wants every kept parameter to reach the output."""
        s = len(self.stages)
        self.num_run = max(1, min(num_stages, s))
        if self.num_run == s:
            return  # the whole step: its output sums every k
        for i in range(s):
            # the stage values that stay observable: inputs of stages 1..num_run (taps and the new output)
            read = any(j == i for m in range(i + 1, self.num_run + 1) for j, _ in self._stage_terms[m])
            if i >= self.num_run or not read:
                self.stages[i] = nn.Identity()
                self._stage_runs[i] = False

    def extra_repr(self) -> str:
        h = "learnable" if isinstance(self.h, torch.Tensor) else self.h
        return f"scheme={self.tableau.name}, stages={self.tableau.stages}, h={h}, post_relu={self.post_relu}"


# --------------------------------------------------------------------------------------------------------------
# Network
# --------------------------------------------------------------------------------------------------------------


def subblocks_for_depth(depth: int) -> int:
    """n_F of "ResNet-L": L = 2·n_F + 2 (stem conv and FC count as one layer each)."""
    if depth < 4 or depth % 2:
        raise ValueError(
            f"depth {depth} is not a ResNet-L depth: L = 2·n_F + 2 must be even and at least 4 "
            f"(e.g. 10, 18, 30, 58, 86)"
        )
    return (depth - 2) // 2


class HOResNet(nn.Module):
    """The paper's CIFAR network (§3.1): conv3x3(in_chans→64) + BN + ReLU, n_F/s RK blocks of s stages each at
    width 64 (one stage, no downsampling), global average pooling, Linear(64→num_classes).

    Args:
        depth: "ResNet-L", L = 2·n_F + 2; n_F must be a multiple of the scheme's stage count.
        scheme: a name in ``TABLEAUX`` or a ``ButcherTableau``.
        rk4_output: "blend" (eq. 11, default), "k4_only" (Table 2 ablation) or "k4_sixth" (first-commit bug);
            which one produced Table 3 is unknown [ASSUMED blend].
        verner_coeffs: "standard" (Verner 1978, default) or "official_code" (the code's 4 deviations).
        learnable_h: one trainable step size per block (the paper's adaptive Verner).
        h: the (initial) step size; 1.0 everywhere in the paper (Fig. 7; the learnable h's init is [ASSUMED]).
        post_block_relu: ReLU after each block output (official code, default True) [ASSUMED].
        stem_stride: 1 (default, 32×32 maps) or 2 (official CFResNet stem, 16×16 maps) [ASSUMED].
        width: channels of the single stage (64 in the paper).
    """

    def __init__(
        self,
        depth: int = 58,
        scheme: str | ButcherTableau = "euler",
        num_classes: int = 10,
        in_chans: int = 3,
        width: int = 64,
        rk4_output: str = "blend",
        verner_coeffs: str = "standard",
        learnable_h: bool = False,
        h: float = 1.0,
        post_block_relu: bool = True,
        stem_stride: int = 1,
        global_pool: str = "avg",
        drop_rate: float = 0.0,
        drop_path_rate: float = 0.0,
        device=None,
        dtype=None,
    ):
        super().__init__()
        dd = dict(device=device, dtype=dtype)
        tableau = get_tableau(scheme, rk4_output=rk4_output, verner_coeffs=verner_coeffs)
        n_sub = subblocks_for_depth(depth)
        if n_sub % tableau.stages:
            valid = [2 * tableau.stages * m + 2 for m in (n_sub // tableau.stages, n_sub // tableau.stages + 1) if m]
            raise ValueError(
                f"ResNet-{depth} has {n_sub} sub-blocks, not a multiple of {tableau.name}'s "
                f"{tableau.stages} stages; use depth {' or '.join(map(str, valid))}"
            )
        if stem_stride not in (1, 2):
            raise ValueError(f"stem_stride must be 1 or 2, not {stem_stride}")
        self.depth, self.scheme, self.tableau = depth, tableau.name, tableau
        self.num_classes, self.in_chans, self.num_features = num_classes, in_chans, width
        self.head_hidden_size = width
        self.drop_rate = drop_rate
        self.grad_checkpointing = False

        self.conv1 = nn.Conv2d(in_chans, width, kernel_size=3, stride=stem_stride, padding=1, bias=False, **dd)
        self.bn1 = nn.BatchNorm2d(width, **dd)
        self.act1 = nn.ReLU()
        n_blocks = n_sub // tableau.stages
        self.layer1 = nn.Sequential(
            *[
                RKBlock(
                    tableau,
                    lambda _: PreActSubBlock(width, **dd),
                    h=h,
                    learnable_h=learnable_h,
                    post_relu=post_block_relu,
                    drop_path=drop_path_rate * b / max(n_blocks - 1, 1),
                    **dd,
                )
                for b in range(n_blocks)
            ]
        )
        self.global_pool, self.linear = create_classifier(width, num_classes, pool_type=global_pool, **dd)
        # features: the stem, then the state after every sub-block F — the RK stage value that the next
        # sub-block reads, the block output after a block's last stage (RKBlock.forward_stages). The network
        # has a single resolution, so, as for timm's ViT, every feature is one of its layers.
        self.feature_info = [dict(num_chs=width, reduction=stem_stride, module="act1")] + [
            dict(num_chs=width, reduction=stem_stride, module=f"layer1.{b}.stages.{i}")
            for b in range(n_blocks)
            for i in range(tableau.stages)
        ]
        self._init_weights()

    def _init_weights(self):
        # He init on every conv and linear weight (§3.1, "weight initialisation in [22]"); BN at 1/0; Linear bias
        # keeps PyTorch's default.
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    @torch.jit.ignore
    def group_matcher(self, coarse: bool = False) -> dict:
        return dict(stem=r"^conv1|^bn1", blocks=r"^layer1\.(\d+)" if coarse else r"^layer1\.(\d+)\.stages\.(\d+)")

    @torch.jit.ignore
    def set_grad_checkpointing(self, enable: bool = True) -> None:
        self.grad_checkpointing = enable

    @torch.jit.ignore
    def get_classifier(self) -> nn.Module:
        return self.linear

    def reset_classifier(self, num_classes: int, global_pool: str | None = None):
        dd = get_device_dtype(self)
        self.num_classes = num_classes
        if global_pool is None:
            global_pool = self.global_pool.pool_type
        self.global_pool, self.linear = create_classifier(self.num_features, num_classes, pool_type=global_pool, **dd)
        self.head_hidden_size = self.num_features * self.global_pool.feat_mult()
        self.global_pool.train(self.training)
        self.linear.train(self.training)

    def _sub_block_index(self, index: int) -> tuple[int, int]:
        """(block, stage) of feature ``index`` >= 1."""
        return (index - 1) // self.tableau.stages, (index - 1) % self.tableau.stages

    def forward_intermediates(
        self,
        x: torch.Tensor,
        indices: int | list[int] | None = None,
        norm: bool = False,
        stop_early: bool = False,
        output_fmt: str = "NCHW",
        intermediates_only: bool = False,
    ):
        """timm's ``forward_intermediates``: features ``feature_info`` lists (the stem, then one per sub-block).
        There is no final norm, so ``norm`` changes nothing."""
        if output_fmt != "NCHW":
            raise ValueError(f"HO-ResNet features are NCHW, not {output_fmt!r}")
        take_indices, max_index = feature_take_indices(len(self.feature_info), indices)
        intermediates = []
        x = self.act1(self.bn1(self.conv1(x)))
        if 0 in take_indices:
            intermediates.append(x)
        s = self.tableau.stages
        stop_block, stop_stage = self._sub_block_index(max_index) if stop_early and max_index > 0 else (-1, -1)
        if not (stop_early and max_index == 0):
            for b, block in enumerate(self.layer1):
                take = [i - 1 - b * s for i in take_indices if 1 + b * s <= i <= b * s + s]
                x, states = block.forward_stages(x, take, stop_stage if b == stop_block else -1)
                intermediates.extend(states)
                if b == stop_block:
                    break
        if intermediates_only:
            return intermediates
        return x, intermediates

    def prune_intermediate_layers(
        self, indices: int | list[int] = 1, prune_norm: bool = False, prune_head: bool = True
    ) -> list[int]:
        take_indices, max_index = feature_take_indices(len(self.feature_info), indices)
        if max_index == 0:
            self.layer1 = nn.Sequential()
        else:
            block, stage = self._sub_block_index(max_index)
            self.layer1 = self.layer1[: block + 1]
            self.layer1[block].truncate(stage + 1)
        self.feature_info = self.feature_info[: max_index + 1]
        if prune_head:
            self.reset_classifier(0, "")
        return take_indices

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        x = self.act1(self.bn1(self.conv1(x)))
        if self.grad_checkpointing and not torch.jit.is_scripting():
            return checkpoint_seq(self.layer1, x)
        return self.layer1(x)

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        x = self.global_pool(x)
        if self.drop_rate:
            x = F.dropout(x, p=self.drop_rate, training=self.training)
        return x if pre_logits else self.linear(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_head(self.forward_features(x))


def checkpoint_filter_fn(state_dict: dict, model: HOResNet) -> dict:
    """Map the official code's flat block keys (``layer1.{i}.conv{k}``/``bn{k}``, stage = (k+1)//2) to ours
    (``layer1.{i}.stages.{stage-1}.conv{1|2}``); other keys (conv1, bn1, linear) are already the same."""
    pattern = re.compile(r"^(layer\d+\.\d+\.)(conv|bn)(\d+)\.(.+)$")
    out = {}
    for key, value in state_dict.items():
        m = pattern.match(key)
        if m and ".stages." not in key:
            k = int(m.group(3))
            key = f"{m.group(1)}stages.{(k - 1) // 2}.{m.group(2)}{(k - 1) % 2 + 1}.{m.group(4)}"
        out[key] = value
    return out


# --------------------------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------------------------


def _cfg(**kwargs) -> dict:
    return {
        "url": "",
        "num_classes": 10,
        "input_size": (3, 32, 32),
        "pool_size": (32, 32),
        "crop_pct": 1.0,
        "interpolation": "bilinear",
        "mean": CIFAR10_MEAN,
        "std": CIFAR10_STD,
        "first_conv": "conv1",
        "classifier": "linear",
        "paper_ids": "arXiv:2103.15244",
        **kwargs,
    }


# Registered names: the depths follow Tables 3-4 and Figs. 4, 9-11 of the paper; the extra schemes (heun3, rk3,
# gill4, kutta_nystrom5) get every paper depth whose number of sub-blocks their stage count divides.
default_cfgs = generate_default_cfgs(
    {
        name: _cfg()
        for name in (
            "horesnet6_euler",
            "horesnet6_midpoint",
            "horesnet10_euler",
            "horesnet10_midpoint",
            "horesnet10_rk4",
            "horesnet10_gill4",
            "horesnet18_euler",
            "horesnet18_midpoint",
            "horesnet18_rk4",
            "horesnet18_gill4",
            "horesnet26_rk4",
            "horesnet26_heun3",
            "horesnet26_rk3",
            "horesnet26_gill4",
            "horesnet26_kutta_nystrom5",
            "horesnet30_euler",
            "horesnet30_midpoint",
            "horesnet30_verner",
            "horesnet30_verner_ada",
            "horesnet58_euler",
            "horesnet58_midpoint",
            "horesnet58_rk4",
            "horesnet58_verner",
            "horesnet58_verner_ada",
            "horesnet58_gill4",
            "horesnet82_rk4",
            "horesnet82_gill4",
            "horesnet86_euler",
            "horesnet86_midpoint",
            "horesnet86_verner",
            "horesnet86_verner_ada",
            "horesnet86_heun3",
            "horesnet86_rk3",
            "horesnet86_kutta_nystrom5",
        )
    }
)


def _create_horesnet(variant: str, pretrained: bool = False, **kwargs) -> HOResNet:
    # features come from forward_intermediates (a feature is a state inside an RK block, not a module output);
    # by default the last 3, as timm's single-resolution ViTs
    out_indices = kwargs.pop("out_indices", 3)
    return build_model_with_cfg(
        HOResNet,
        variant,
        pretrained,
        pretrained_filter_fn=checkpoint_filter_fn,
        feature_cfg=dict(out_indices=out_indices, feature_cls="getter"),
        **kwargs,
    )


@register_model
def horesnet6_euler(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-6, euler: 2 sub-blocks in 2 blocks (Fig. 10)."""
    return _create_horesnet("horesnet6_euler", pretrained, **dict(dict(depth=6, scheme="euler"), **kwargs))


@register_model
def horesnet6_midpoint(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-6, midpoint: 2 sub-blocks in 1 block (Fig. 10)."""
    return _create_horesnet("horesnet6_midpoint", pretrained, **dict(dict(depth=6, scheme="midpoint"), **kwargs))


@register_model
def horesnet10_euler(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-10, euler: 4 sub-blocks in 4 blocks (Table 3, Fig. 11)."""
    return _create_horesnet("horesnet10_euler", pretrained, **dict(dict(depth=10, scheme="euler"), **kwargs))


@register_model
def horesnet10_midpoint(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-10, midpoint: 4 sub-blocks in 2 blocks (Table 3, Fig. 11)."""
    return _create_horesnet("horesnet10_midpoint", pretrained, **dict(dict(depth=10, scheme="midpoint"), **kwargs))


@register_model
def horesnet10_rk4(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-10, rk4: 4 sub-blocks in 1 block (Table 3, Fig. 11)."""
    return _create_horesnet("horesnet10_rk4", pretrained, **dict(dict(depth=10, scheme="rk4"), **kwargs))


@register_model
def horesnet10_gill4(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-10, gill4: 4 sub-blocks in 1 block (extra scheme, not in the paper)."""
    return _create_horesnet("horesnet10_gill4", pretrained, **dict(dict(depth=10, scheme="gill4"), **kwargs))


@register_model
def horesnet18_euler(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-18, euler: 8 sub-blocks in 8 blocks (Table 3, Fig. 4)."""
    return _create_horesnet("horesnet18_euler", pretrained, **dict(dict(depth=18, scheme="euler"), **kwargs))


@register_model
def horesnet18_midpoint(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-18, midpoint: 8 sub-blocks in 4 blocks (Table 3, Fig. 4)."""
    return _create_horesnet("horesnet18_midpoint", pretrained, **dict(dict(depth=18, scheme="midpoint"), **kwargs))


@register_model
def horesnet18_rk4(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-18, rk4: 8 sub-blocks in 2 blocks (Table 3, Fig. 4)."""
    return _create_horesnet("horesnet18_rk4", pretrained, **dict(dict(depth=18, scheme="rk4"), **kwargs))


@register_model
def horesnet18_gill4(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-18, gill4: 8 sub-blocks in 2 blocks (extra scheme, not in the paper)."""
    return _create_horesnet("horesnet18_gill4", pretrained, **dict(dict(depth=18, scheme="gill4"), **kwargs))


@register_model
def horesnet26_rk4(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-26, rk4: 12 sub-blocks in 3 blocks (Table 3)."""
    return _create_horesnet("horesnet26_rk4", pretrained, **dict(dict(depth=26, scheme="rk4"), **kwargs))


@register_model
def horesnet26_heun3(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-26, heun3: 12 sub-blocks in 4 blocks (extra scheme, not in the paper)."""
    return _create_horesnet("horesnet26_heun3", pretrained, **dict(dict(depth=26, scheme="heun3"), **kwargs))


@register_model
def horesnet26_rk3(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-26, rk3: 12 sub-blocks in 4 blocks (extra scheme, not in the paper)."""
    return _create_horesnet("horesnet26_rk3", pretrained, **dict(dict(depth=26, scheme="rk3"), **kwargs))


@register_model
def horesnet26_gill4(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-26, gill4: 12 sub-blocks in 3 blocks (extra scheme, not in the paper)."""
    return _create_horesnet("horesnet26_gill4", pretrained, **dict(dict(depth=26, scheme="gill4"), **kwargs))


@register_model
def horesnet26_kutta_nystrom5(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-26, kutta_nystrom5: 12 sub-blocks in 2 blocks (extra scheme, not in the paper)."""
    return _create_horesnet(
        "horesnet26_kutta_nystrom5", pretrained, **dict(dict(depth=26, scheme="kutta_nystrom5"), **kwargs)
    )


@register_model
def horesnet30_euler(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-30, euler: 14 sub-blocks in 14 blocks (Table 3)."""
    return _create_horesnet("horesnet30_euler", pretrained, **dict(dict(depth=30, scheme="euler"), **kwargs))


@register_model
def horesnet30_midpoint(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-30, midpoint: 14 sub-blocks in 7 blocks (Table 3)."""
    return _create_horesnet("horesnet30_midpoint", pretrained, **dict(dict(depth=30, scheme="midpoint"), **kwargs))


@register_model
def horesnet30_verner(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-30, verner: 14 sub-blocks in 1 block (Table 3)."""
    return _create_horesnet("horesnet30_verner", pretrained, **dict(dict(depth=30, scheme="verner"), **kwargs))


@register_model
def horesnet30_verner_ada(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-30, verner with a learnable step h per block: 14 sub-blocks in 1 block (Table 3)."""
    return _create_horesnet(
        "horesnet30_verner_ada", pretrained, **dict(dict(depth=30, scheme="verner", learnable_h=True), **kwargs)
    )


@register_model
def horesnet58_euler(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-58, euler: 28 sub-blocks in 28 blocks (Tables 2-4)."""
    return _create_horesnet("horesnet58_euler", pretrained, **dict(dict(depth=58, scheme="euler"), **kwargs))


@register_model
def horesnet58_midpoint(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-58, midpoint: 28 sub-blocks in 14 blocks (Tables 2-4)."""
    return _create_horesnet("horesnet58_midpoint", pretrained, **dict(dict(depth=58, scheme="midpoint"), **kwargs))


@register_model
def horesnet58_rk4(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-58, rk4: 28 sub-blocks in 7 blocks (Tables 2-4)."""
    return _create_horesnet("horesnet58_rk4", pretrained, **dict(dict(depth=58, scheme="rk4"), **kwargs))


@register_model
def horesnet58_verner(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-58, verner: 28 sub-blocks in 2 blocks (Tables 2-4)."""
    return _create_horesnet("horesnet58_verner", pretrained, **dict(dict(depth=58, scheme="verner"), **kwargs))


@register_model
def horesnet58_verner_ada(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-58, verner with a learnable step h per block: 28 sub-blocks in 2 blocks (Tables 2-4)."""
    return _create_horesnet(
        "horesnet58_verner_ada", pretrained, **dict(dict(depth=58, scheme="verner", learnable_h=True), **kwargs)
    )


@register_model
def horesnet58_gill4(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-58, gill4: 28 sub-blocks in 7 blocks (extra scheme, not in the paper)."""
    return _create_horesnet("horesnet58_gill4", pretrained, **dict(dict(depth=58, scheme="gill4"), **kwargs))


@register_model
def horesnet82_rk4(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-82, rk4: 40 sub-blocks in 10 blocks (Table 3, Fig. 9)."""
    return _create_horesnet("horesnet82_rk4", pretrained, **dict(dict(depth=82, scheme="rk4"), **kwargs))


@register_model
def horesnet82_gill4(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-82, gill4: 40 sub-blocks in 10 blocks (extra scheme, not in the paper)."""
    return _create_horesnet("horesnet82_gill4", pretrained, **dict(dict(depth=82, scheme="gill4"), **kwargs))


@register_model
def horesnet86_euler(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-86, euler: 42 sub-blocks in 42 blocks (Table 3, Fig. 9)."""
    return _create_horesnet("horesnet86_euler", pretrained, **dict(dict(depth=86, scheme="euler"), **kwargs))


@register_model
def horesnet86_midpoint(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-86, midpoint: 42 sub-blocks in 21 blocks (Table 3, Fig. 9)."""
    return _create_horesnet("horesnet86_midpoint", pretrained, **dict(dict(depth=86, scheme="midpoint"), **kwargs))


@register_model
def horesnet86_verner(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-86, verner: 42 sub-blocks in 3 blocks (Table 3, Fig. 9)."""
    return _create_horesnet("horesnet86_verner", pretrained, **dict(dict(depth=86, scheme="verner"), **kwargs))


@register_model
def horesnet86_verner_ada(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-86, verner with a learnable step h per block: 42 sub-blocks in 3 blocks (Table 3, Fig. 9)."""
    return _create_horesnet(
        "horesnet86_verner_ada", pretrained, **dict(dict(depth=86, scheme="verner", learnable_h=True), **kwargs)
    )


@register_model
def horesnet86_heun3(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-86, heun3: 42 sub-blocks in 14 blocks (extra scheme, not in the paper)."""
    return _create_horesnet("horesnet86_heun3", pretrained, **dict(dict(depth=86, scheme="heun3"), **kwargs))


@register_model
def horesnet86_rk3(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-86, rk3: 42 sub-blocks in 14 blocks (extra scheme, not in the paper)."""
    return _create_horesnet("horesnet86_rk3", pretrained, **dict(dict(depth=86, scheme="rk3"), **kwargs))


@register_model
def horesnet86_kutta_nystrom5(pretrained=False, **kwargs) -> HOResNet:
    """HO-ResNet-86, kutta_nystrom5: 42 sub-blocks in 7 blocks (extra scheme, not in the paper)."""
    return _create_horesnet(
        "horesnet86_kutta_nystrom5", pretrained, **dict(dict(depth=86, scheme="kutta_nystrom5"), **kwargs)
    )
