"""HO-ResNet: residual stacks wired as explicit Runge–Kutta steps.

Paper: Z. Luo, Z. Sun, W. Zhou, Z. Wu, S. Kamata, "Rethinking ResNets: Improved Stacking Strategies With High
Order Schemes", arXiv:2103.15244. Ground truth: ``shared/specs/horesnet.md`` (section numbers below refer to it).

A plain ResNet block is one forward-Euler step x + F(x). HO-ResNet keeps the sub-block F (pre-activation
BN-ReLU-conv3x3-BN-ReLU-conv3x3, 64 channels) and the number of F in the network fixed, and only changes how
they are wired: s consecutive F become the s stages of one explicit Runge–Kutta (RK) step::

    k_1 = F_1(x)
    k_i = F_i(x + h * sum_{j<i} a_ij k_j)        i = 2..s   (each stage has its own weights)
    y   = ReLU(x + h * sum_i b_i k_i)                        (ReLU as in the official code, §2.9)

Every scheme is therefore a Butcher tableau (A, b, c) — ``TABLEAUX`` / ``get_tableau(name)`` — driving one
generic block, ``RKBlock``. The nodes c are not used by the network (§2.1: the time dependence is carried by
the stages' distinct weights); they are kept for consistency checks (row sums of A equal c).

Schemes: ``euler`` (= ResNet), ``midpoint``, ``rk4``, ``verner`` (Verner 1978 8(9) pair, 8th-order weights,
truncated to the 14 stages they use, §2.6) from the paper; ``heun3``, ``rk3``, ``gill4``, ``kutta_nystrom5``
as extras. Options the spec lists: ``rk4_output`` ("blend" | "k4_only" | "k4_sixth"), ``verner_coeffs``
("standard" | "official_code"), ``learnable_h`` (the paper's adaptive Verner: one scalar h per block).

Registered names: ``horesnet{L}_{scheme}`` for every depth/scheme of Tables 3–4 and Figs. 10–11, where
"ResNet-L" has L = 2·n_F + 2 weighted layers (stem conv + FC), plus ``horesnet{L}_verner_ada`` (learnable h)
and the extras at depths their stage count divides. ``num_classes`` (default 10) and ``in_chans`` (3) are
timm kwargs; the default input is 32×32.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from timm.layers import SelectAdaptivePool2d
from timm.models import build_model_with_cfg, generate_default_cfgs, register_model

__all__ = ["ButcherTableau", "TABLEAUX", "SCHEMES", "get_tableau", "register_tableau", "PreActSubBlock", "RKBlock",
           "HOResNet", "checkpoint_filter_fn", "subblocks_for_depth"]

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
            raise ValueError(f"tableau {self.name!r}: A needs {s} rows and c {s} entries to match b; got "
                             f"{len(self.a)} rows and {len(self.c)} nodes")
        bad = [i for i, row in enumerate(self.a) if len(row) != i]
        if bad:
            raise ValueError(f"tableau {self.name!r}: row i of A (0-based) must list the i coefficients a_i0..a_i,i-1 "
                             f"of an explicit method; rows {bad} do not")

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
        return ButcherTableau(name or f"{self.name}*", tuple(map(tuple, a)), tuple(b), tuple(c), self.order,
                              self.reference, "modified copy")


def _explicit(name: str, rows: Sequence[Sequence[float]], b: Sequence[float], c: Sequence[float], order: int,
              reference: str, note: str = "") -> ButcherTableau:
    """Build a tableau from the rows below the diagonal (stage 2..s), padding each with zeros."""
    s = len(b)
    a = [()] + [tuple(float(v) for v in row) + (0.0,) * (i + 1 - len(row)) for i, row in enumerate(rows)]
    if len(a) != s:
        raise ValueError(f"tableau {name!r}: {len(a)} stages in A but {s} weights in b")
    return ButcherTableau(name, tuple(a), tuple(map(float, b)), tuple(map(float, c)), order, reference, note)


_S6 = math.sqrt(6.0)
_S2 = math.sqrt(2.0)

# Verner (1978) 8(9) pair, stages 1..14 with the 8th-order weights (spec §2.6 table; c5..c7 involve √6).
_VERNER_ROWS = [
    [1 / 12],
    [1 / 27, 2 / 27],
    [1 / 24, 0, 3 / 24],
    [(4 + 94 * _S6) / 375, 0, -(282 + 252 * _S6) / 375, (328 + 208 * _S6) / 375],
    [(9 - _S6) / 150, 0, 0, (312 + 32 * _S6) / 1425, (69 + 29 * _S6) / 570],
    [(927 - 347 * _S6) / 1250, 0, 0, (-16248 + 7328 * _S6) / 9375, (-489 + 179 * _S6) / 3750,
     (14268 - 5798 * _S6) / 9375],
    [4 / 54, 0, 0, 0, 0, (16 - _S6) / 54, (16 + _S6) / 54],
    [38 / 512, 0, 0, 0, 0, (118 - 23 * _S6) / 512, (118 + 23 * _S6) / 512, -18 / 512],
    [11 / 144, 0, 0, 0, 0, (266 - _S6) / 864, (266 + _S6) / 864, -1 / 16, -8 / 27],
    [(5034 - 271 * _S6) / 61440, 0, 0, 0, 0, 0, (7859 - 1626 * _S6) / 10240, (-2232 + 813 * _S6) / 20480,
     (-594 + 271 * _S6) / 960, (657 - 813 * _S6) / 5120],
    [(5996 - 3794 * _S6) / 405, 0, 0, 0, 0, (-4342 - 338 * _S6) / 9, (154922 - 40458 * _S6) / 135,
     (-4176 + 3794 * _S6) / 45, (-340864 + 242816 * _S6) / 405, (26304 - 15176 * _S6) / 45, -26624 / 81],
    [(3793 + 2168 * _S6) / 103680, 0, 0, 0, 0, (4042 + 2263 * _S6) / 13824, (-231278 + 40717 * _S6) / 69120,
     (7947 - 2168 * _S6) / 11520, (1048 - 542 * _S6) / 405, (-1383 + 542 * _S6) / 720, 2624 / 1053, 3 / 1664],
    [-137 / 1296, 0, 0, 0, 0, (5642 - 337 * _S6) / 864, (5642 + 337 * _S6) / 864, -299 / 48, 184 / 81, -44 / 9,
     -5120 / 1053, -11 / 468, 16 / 9],
]
_VERNER_B = [103 / 1680, 0, 0, 0, 0, 0, 0, -27 / 140, 76 / 105, -201 / 280, 1024 / 1365, 3 / 7280, 12 / 35, 9 / 280]
_VERNER_C = [0, 1 / 12, 1 / 9, 1 / 6, (2 + 2 * _S6) / 15, (6 + _S6) / 15, (6 - _S6) / 15, 2 / 3, 1 / 2, 1 / 3,
             1 / 4, 4 / 3, 5 / 6, 1]


def _verner_official_code() -> ButcherTableau:
    """Verner as the official HO-ResNet code has it: the four deviations of spec §2.6 marked ✗."""
    rows = [list(r) for r in _VERNER_ROWS]
    rows[6 - 2][0] = 8 / 150  # a61: 0.053333 in the code (standard (9-√6)/150 = 0.043670)
    rows[12 - 2][6] = (154922 - 40458) / 135  # a12,7 = 847.88: √6 dropped
    rows[12 - 2][9] = (26304 - 15176) * _S6 / 45  # a12,10 = 605.73: √6 on the wrong term
    b = list(_VERNER_B)
    b[8 - 1] = 27 / 140  # `outx -= -27/140.*k8` flips the sign of b8
    c = [sum(r) for r in [[]] + rows]  # keep c = row sums so only the weights differ from the code's values
    return _explicit("verner_official_code", rows, b, c, 0, "official HO-ResNet code (zlannnn/HO-ResNet)",
                     "sensitivity ablation: not a convergent method (Σb = 1.3857, spec §2.6/§7 C2-C3)")


TABLEAUX: dict[str, ButcherTableau] = {t.name: t for t in [
    _explicit("euler", [], [1], [0], 1, "forward Euler; ResNet block x + F(x)"),
    _explicit("midpoint", [[1 / 2]], [0, 1], [0, 1 / 2], 2, "explicit mid-point, paper eqs. (8)-(9)"),
    _explicit("rk4", [[1 / 2], [0, 1 / 2], [0, 0, 1]], [1 / 6, 1 / 3, 1 / 3, 1 / 6], [0, 1 / 2, 1 / 2, 1], 4,
              "classical Runge-Kutta, paper eqs. (10)-(11)"),
    _explicit("verner", _VERNER_ROWS, _VERNER_B, _VERNER_C, 8,
              "J. H. Verner, SIAM J. Numer. Anal. 15(4):772-790, 1978; 8th-order weights, stages 15-16 dropped "
              "(paper eqs. (14)-(15))"),
    _explicit("heun3", [[1 / 3], [0, 2 / 3]], [1 / 4, 0, 3 / 4], [0, 1 / 3, 2 / 3], 3, "Heun's third-order method"),
    _explicit("rk3", [[1 / 2], [-1, 2]], [1 / 6, 2 / 3, 1 / 6], [0, 1 / 2, 1], 3, "Kutta's third-order method"),
    _explicit("gill4", [[1 / 2], [(_S2 - 1) / 2, (2 - _S2) / 2], [0, -_S2 / 2, 1 + _S2 / 2]],
              [1 / 6, (2 - _S2) / 6, (2 + _S2) / 6, 1 / 6], [0, 1 / 2, 1 / 2, 1], 4, "Runge-Kutta-Gill (1951)"),
    _explicit("kutta_nystrom5", [[1 / 3], [4 / 25, 6 / 25], [1 / 4, -3, 15 / 4], [2 / 27, 10 / 9, -50 / 81, 8 / 81],
                                 [2 / 25, 12 / 25, 2 / 15, 8 / 75, 0]],
              [23 / 192, 0, 125 / 192, 0, -27 / 64, 125 / 192], [0, 1 / 3, 2 / 5, 1, 2 / 3, 4 / 5], 5,
              "Kutta's 6-stage fifth-order method as corrected by Nystrom (1925)"),
    # Options of the paper's schemes (spec §2.5, §2.6, §8 items 3-4); not schemes of their own.
    _explicit("rk4_k4_only", [[1 / 2], [0, 1 / 2], [0, 0, 1]], [0, 0, 0, 1], [0, 1 / 2, 1 / 2, 1], 1,
              "paper §2.5 / Table 2 '(1x)' ablation: y = x + k4", "first order as an ODE solver"),
    _explicit("rk4_k4_sixth", [[1 / 2], [0, 1 / 2], [0, 0, 1]], [0, 0, 0, 1 / 6], [0, 1 / 2, 1 / 2, 1], 0,
              "earliest official commit (2021-03-28): y = x + k4/6", "not consistent (Σb = 1/6)"),
    _verner_official_code(),
]}

SCHEMES = ("euler", "midpoint", "rk4", "verner", "heun3", "rk3", "gill4", "kutta_nystrom5")
_RK4_OUTPUTS = {"blend": "rk4", "k4_only": "rk4_k4_only", "k4_sixth": "rk4_k4_sixth"}
_VERNER_COEFFS = {"standard": "verner", "official_code": "verner_official_code"}


def get_tableau(name: str | ButcherTableau, rk4_output: str = "blend",
                verner_coeffs: str = "standard") -> ButcherTableau:
    """The tableau of scheme ``name`` (a key of ``TABLEAUX``), with the spec's options applied.

    ``rk4_output`` applies to ``rk4`` only and ``verner_coeffs`` to ``verner`` only; a non-default option for
    another scheme is an error rather than silently ignored.
    """
    if isinstance(name, ButcherTableau):
        tableau = name
    elif name not in TABLEAUX:
        raise ValueError(f"unknown HO-ResNet scheme {name!r}; known: {', '.join(TABLEAUX)} "
                         f"(or pass a ButcherTableau / register one with register_tableau)")
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
            raise ValueError(f"verner_coeffs={verner_coeffs!r} only applies to scheme 'verner', "
                             f"not {tableau.name!r}")
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
        raise ValueError(f"tableau {tableau.name!r} is inconsistent: row sums of A minus c = "
                         f"{[round(r, 12) for r in rows]}, sum(b) - 1 = {total:.3g}; fix the coefficients")
    if check_order:
        found = tableau.algebraic_order(max_order=tableau.order + 1)
        if found < tableau.order:
            raise ValueError(f"tableau {tableau.name!r} claims order {tableau.order} but satisfies the order "
                             f"conditions only up to {found}; check the coefficients")
    TABLEAUX[tableau.name] = tableau
    return tableau


# --------------------------------------------------------------------------------------------------------------
# Blocks
# --------------------------------------------------------------------------------------------------------------

def _conv3x3(in_chs: int, out_chs: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_chs, out_chs, kernel_size=3, stride=stride, padding=1, bias=False)


class PreActSubBlock(nn.Module):
    """The sub-block F of §2.2: BN-ReLU-conv3x3-BN-ReLU-conv3x3, bias-free (73,984 params at width 64)."""

    def __init__(self, channels: int = 64):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv1 = _conv3x3(channels, channels)
        self.bn2 = nn.BatchNorm2d(channels)
        self.conv2 = _conv3x3(channels, channels)

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
            parameter ``h`` (the paper's adaptive Verner, §2.6; init 1.0 is [ASSUMED], the paper gives none).
        learnable_h: make h a trainable scalar shared by all stages of this block (unconstrained, §2.10).
        post_relu: apply ReLU to the block output (official code; the paper's equations have none, §2.9).

    Each k_j is released as soon as no later stage input needs it, and the output sum is accumulated as the
    stages finish, so RK4 keeps one extra map rather than four (the "can be optimised to one" of §2.11).
    """

    def __init__(self, tableau: ButcherTableau, make_stage: Callable[[int], nn.Module], h: float = 1.0,
                 learnable_h: bool = False, post_relu: bool = True):
        super().__init__()
        self.tableau = tableau
        self.stages = nn.ModuleList(make_stage(i) for i in range(tableau.stages))
        self.post_relu = post_relu
        if learnable_h:
            self.h = nn.Parameter(torch.tensor(float(h)))
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

    @staticmethod
    def _lincomb(terms: list[tuple[float, torch.Tensor]]) -> torch.Tensor:
        acc = terms[0][1] * terms[0][0]
        for coef, k in terms[1:]:
            acc = torch.add(acc, k, alpha=coef)
        return acc

    def _step(self, x: torch.Tensor, terms: list[tuple[float, torch.Tensor]]) -> torch.Tensor:
        """x + h · Σ coef·k, folding a constant h into the coefficients."""
        if isinstance(self.h, torch.Tensor):
            return torch.addcmul(x, self.h, self._lincomb(terms))
        out = x
        for coef, k in terms:
            out = torch.add(out, k, alpha=coef * self.h)
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ks: list[torch.Tensor | None] = [None] * len(self.stages)
        acc: torch.Tensor | None = None  # Σ b_i k_i so far (learnable h) or x + h Σ b_i k_i (constant h)
        for i, stage in enumerate(self.stages):
            terms = [(a, ks[j]) for j, a in self._stage_terms[i]]
            stage_input = self._step(x, terms) if terms else x
            del terms
            for j in self._release_at[i]:
                ks[j] = None
            k = stage(stage_input)
            del stage_input
            b = self._out_weight[i]
            if b != 0.0:
                if isinstance(self.h, torch.Tensor):
                    acc = k * b if acc is None else torch.add(acc, k, alpha=b)
                else:
                    acc = torch.add(x if acc is None else acc, k, alpha=b * self.h)
            if self._read_later[i]:
                ks[i] = k
            del k
        if acc is None:  # no output weight at all: y = x (only a custom tableau can do this)
            out = x
        elif isinstance(self.h, torch.Tensor):
            out = torch.addcmul(x, self.h, acc)
        else:
            out = acc
        if self.post_relu:
            return F.relu(out, inplace=out is not x)  # `out` is a fresh sum; never modify the block input
        return out

    def extra_repr(self) -> str:
        h = "learnable" if isinstance(self.h, torch.Tensor) else self.h
        return f"scheme={self.tableau.name}, stages={self.tableau.stages}, h={h}, post_relu={self.post_relu}"


# --------------------------------------------------------------------------------------------------------------
# Network
# --------------------------------------------------------------------------------------------------------------

def subblocks_for_depth(depth: int) -> int:
    """n_F of "ResNet-L": L = 2·n_F + 2 (stem conv and FC count as one layer each)."""
    if depth < 4 or depth % 2:
        raise ValueError(f"depth {depth} is not a ResNet-L depth: L = 2·n_F + 2 must be even and at least 4 "
                         f"(e.g. 10, 18, 30, 58, 86)")
    return (depth - 2) // 2


class HOResNet(nn.Module):
    """The paper's CIFAR network (§2.8): conv3x3(in_chans→64) + BN + ReLU, n_F/s RK blocks of s stages each at
    width 64 (one stage, no downsampling), global average pooling, Linear(64→num_classes).

    Args:
        depth: "ResNet-L", L = 2·n_F + 2; n_F must be a multiple of the scheme's stage count.
        scheme: a name in ``TABLEAUX`` or a ``ButcherTableau``.
        rk4_output: "blend" (eq. 11, default), "k4_only" (Table 2 ablation) or "k4_sixth" (first-commit bug);
            which one produced Table 3 is unknown [ASSUMED blend, §8 item 3].
        verner_coeffs: "standard" (Verner 1978, default) or "official_code" (the code's 4 deviations).
        learnable_h: one trainable step size per block (the paper's adaptive Verner).
        h: the (initial) step size; 1.0 everywhere in the paper (the learnable h's init is [ASSUMED], §8 item 5).
        post_block_relu: ReLU after each block output (official code, default True) [ASSUMED, §8 item 2].
        stem_stride: 1 (default, 32×32 maps) or 2 (official CFResNet stem, 16×16 maps) [ASSUMED, §8 item 1].
        width: channels of the single stage (64 in the paper).
    """

    def __init__(self, depth: int = 58, scheme: str | ButcherTableau = "euler", num_classes: int = 10,
                 in_chans: int = 3, width: int = 64, rk4_output: str = "blend", verner_coeffs: str = "standard",
                 learnable_h: bool = False, h: float = 1.0, post_block_relu: bool = True, stem_stride: int = 1,
                 global_pool: str = "avg", drop_rate: float = 0.0):
        super().__init__()
        tableau = get_tableau(scheme, rk4_output=rk4_output, verner_coeffs=verner_coeffs)
        n_sub = subblocks_for_depth(depth)
        if n_sub % tableau.stages:
            valid = [2 * tableau.stages * m + 2 for m in (n_sub // tableau.stages, n_sub // tableau.stages + 1) if m]
            raise ValueError(f"ResNet-{depth} has {n_sub} sub-blocks, not a multiple of {tableau.name}'s "
                             f"{tableau.stages} stages; use depth {' or '.join(map(str, valid))}")
        if stem_stride not in (1, 2):
            raise ValueError(f"stem_stride must be 1 or 2, not {stem_stride}")
        self.depth, self.scheme, self.tableau = depth, tableau.name, tableau
        self.num_classes, self.in_chans, self.num_features = num_classes, in_chans, width
        self.head_hidden_size = width
        self.drop_rate = drop_rate

        self.conv1 = nn.Conv2d(in_chans, width, kernel_size=3, stride=stem_stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.layer1 = nn.Sequential(*[
            RKBlock(tableau, lambda _: PreActSubBlock(width), h=h, learnable_h=learnable_h, post_relu=post_block_relu)
            for _ in range(n_sub // tableau.stages)])
        self.global_pool = SelectAdaptivePool2d(pool_type=global_pool, flatten=True)
        self.linear = nn.Linear(width, num_classes) if num_classes > 0 else nn.Identity()
        self.feature_info = [dict(num_chs=width, reduction=stem_stride, module="layer1")]
        self._init_weights()

    def _init_weights(self):
        # He init on every conv and linear weight (§2.8); BN at 1/0; Linear bias keeps PyTorch's default.
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    @torch.jit.ignore
    def get_classifier(self) -> nn.Module:
        return self.linear

    def reset_classifier(self, num_classes: int, global_pool: str | None = None):
        self.num_classes = num_classes
        if global_pool is not None:
            self.global_pool = SelectAdaptivePool2d(pool_type=global_pool, flatten=True)
        self.linear = nn.Linear(self.num_features, num_classes) if num_classes > 0 else nn.Identity()

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv1(x)))
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
    return {"url": "", "num_classes": 10, "input_size": (3, 32, 32), "pool_size": None, "crop_pct": 1.0,
            "interpolation": "bilinear", "mean": CIFAR10_MEAN, "std": CIFAR10_STD, "first_conv": "conv1",
            "classifier": "linear", "paper_ids": "arXiv:2103.15244", **kwargs}


# name suffix -> (scheme, fixed model kwargs); the depths follow Tables 3-4 and Figs. 10-11 (spec §3).
_SUFFIXES = {
    "euler": ("euler", {}), "midpoint": ("midpoint", {}), "rk4": ("rk4", {}), "verner": ("verner", {}),
    "verner_ada": ("verner", {"learnable_h": True}),
    "heun3": ("heun3", {}), "rk3": ("rk3", {}), "gill4": ("gill4", {}), "kutta_nystrom5": ("kutta_nystrom5", {}),
}
_VARIANT_DEPTHS = {
    "euler": (6, 10, 18, 30, 58, 86),
    "midpoint": (6, 10, 18, 30, 58, 86),
    "rk4": (10, 18, 26, 58, 82),
    "verner": (30, 58, 86),
    "verner_ada": (30, 58, 86),
    # extras (not in the paper): every paper depth whose n_F their stage count divides
    "heun3": (26, 86), "rk3": (26, 86), "gill4": (10, 18, 26, 58, 82), "kutta_nystrom5": (26, 86),
}
VARIANTS = {f"horesnet{depth}_{suffix}": (depth, *_SUFFIXES[suffix])
            for suffix, depths in _VARIANT_DEPTHS.items() for depth in depths}

default_cfgs = generate_default_cfgs({name: _cfg() for name in VARIANTS})


def _create_horesnet(variant: str, pretrained: bool = False, **kwargs) -> HOResNet:
    return build_model_with_cfg(HOResNet, variant, pretrained, pretrained_filter_fn=checkpoint_filter_fn,
                                feature_cfg=dict(flatten_sequential=False, out_indices=(0,)), **kwargs)


def _make_entrypoint(name: str, depth: int, scheme: str, fixed: dict) -> Callable[..., HOResNet]:
    def entrypoint(pretrained: bool = False, **kwargs) -> HOResNet:
        return _create_horesnet(name, pretrained, **dict(dict(depth=depth, scheme=scheme, **fixed), **kwargs))

    entrypoint.__name__ = entrypoint.__qualname__ = name
    extra = " with a learnable step h per block" if fixed.get("learnable_h") else ""
    entrypoint.__doc__ = (f"HO-ResNet-{depth}, {scheme} scheme{extra} "
                          f"({subblocks_for_depth(depth)} sub-blocks, CIFAR 32×32).")
    return entrypoint


# One @register_model entry point per variant: the table above is the list of `def horesnet58_rk4(...)` etc.
for _name, (_depth, _scheme, _fixed) in VARIANTS.items():
    globals()[_name] = register_model(_make_entrypoint(_name, _depth, _scheme, _fixed))
del _name, _depth, _scheme, _fixed
