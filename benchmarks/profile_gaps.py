"""Where a model loses against its baseline on CPU: per-op time of a step, and where its memory goes.

    .venv/bin/python benchmarks/profile_gaps.py steps-train   [--batch-size 8] [--steps 2] [--threads 1]
    .venv/bin/python benchmarks/profile_gaps.py transnext     [--batch-size 8] [--steps 2] [--threads 1]
    .venv/bin/python benchmarks/profile_gaps.py MODEL_A MODEL_B [--mode train|infer] ...

For two models (baseline first) it profiles ``--steps`` steps of each, alternating A B B A ..., with ``torch.profiler`` (CPU
activities, input shapes) and prints:

- time per op category, both models, and their difference (ms per step): matmuls (``addmm``, ``mm``, ``bmm``,
  SDPA, convolutions, with their backward), data movement (``cat``, ``copy_``, ``slice_backward``, ``contiguous``
  / ``clone``, ``index``, ``unfold``/``im2col``...), normalisation, element-wise, other; with the number of op
  calls (a proxy for launch and dispatch overhead);
- the ops with the largest difference, with the input shapes of each call, so a copy is pinned to its tensor;
- the matmul GFLOP/s of each model: equal FLOPs at lower GFLOP/s means smaller (less efficient) GEMMs, not extra
  operations;
- memory: the peak of live activation storages during an inference forward (``aten`` outputs alive at the same
  time) with the ops whose outputs are alive at that peak, and the bytes autograd saves for backward in a
  training forward, by top-level module.

Timings come from one process on a possibly shared machine: read the *shares* and the per-op differences, which
load scales alike; the model-to-model ratios come from ``depthbench bench`` (interleaved rounds).
"""

from __future__ import annotations

import argparse
import collections
import sys
import weakref
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import models  # noqa: E402,F401
from harness.measure.bench import ModelStep, Participant, build, input_size_of  # noqa: E402
from harness.measure.flops import count_flops  # noqa: E402

PRESETS = {
    "steps-train": ("deit_small_patch16_224", "steps_deit_small", "train"),
    "transnext": ("swin_tiny_patch4_window7_224", "transnext_tiny", "infer"),
}

MATMUL = (
    "addmm",
    "mm",
    "bmm",
    "matmul",
    "linear",
    "convolution",
    "conv2d",
    "mkldnn_convolution",
    "scaled_dot_product",
    "baddbmm",
    "_flash_attention",
)
MOVE = (
    "cat",
    "copy_",
    "slice_backward",
    "contiguous",
    "clone",
    "index",
    "unfold",
    "im2col",
    "col2im",
    "roll",
    "narrow_copy",
    "pad",
    "constant_pad",
    "select_backward",
    "gather",
    "scatter",
    "stack",
    "repeat",
    "expand_backward",
    "permute",
    "transpose",
    "reshape",
    "_unsafe_view",
    "view",
)
NORM = ("layer_norm", "batch_norm", "group_norm")


def category(name: str) -> str:
    op = name.replace("aten::", "")
    if any(key in op for key in MATMUL):
        return "matmul/conv"
    if any(key in op for key in NORM):
        return "normalisation"
    if any(op == key or op.startswith(key) for key in MOVE):
        return "data movement"
    if op.startswith(
        (
            "add",
            "mul",
            "div",
            "sub",
            "gelu",
            "silu",
            "relu",
            "softmax",
            "_softmax",
            "sigmoid",
            "tanh",
            "exp",
            "sqrt",
            "rsqrt",
            "pow",
            "neg",
            "threshold",
            "sum",
            "mean",
            "fill_",
            "zero_",
            "zeros",
            "empty",
            "where",
            "masked",
            "clamp",
            "abs",
            "sign",
            "lerp",
            "_foreach",
        )
    ):
        return "element-wise"
    return "other"


def leaf_events(profs):
    """Self times of aten ops (what runs, not the wrappers around it), in ms, with call counts and shapes,
    summed over the profiled steps."""
    table = {}
    for prof in profs:
        for event in prof.key_averages(group_by_input_shape=True):
            if not event.key.startswith("aten::") or event.self_cpu_time_total <= 0:
                continue
            key = (event.key, str(event.input_shapes)[:160])
            ms, calls = table.get(key, (0.0, 0))
            table[key] = (ms + event.self_cpu_time_total / 1000, calls + event.count)
    return table


def profile_pair(names, mode, batch_size, steps, size):
    participants = [Participant(n, {}, input_size_of(n, size)) for n in names]
    runners = [ModelStep(build(p, "cpu"), p.input_size, batch_size, mode) for p in participants]
    for r in runners:  # warm-up (allocator, oneDNN primitive caches)
        r()
    profs = [[], []]
    for i in range(steps):  # one step each, alternating (A B B A ...), so a load trend hits both alike
        for k in (0, 1) if i % 2 == 0 else (1, 0):
            with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
                runners[k]()
            profs[k].append(prof)
    return participants, profs


def report_time(names, participants, profs, mode, steps, batch_size):
    tables = [leaf_events(p) for p in profs]
    macs = [count_flops(build(p), inputs=(torch.empty(1, *p.input_size, device="meta"),)).total for p in participants]
    print(f"\n## {names[1]} vs {names[0]}: {mode} step, ms per step (self CPU time of aten ops, {steps} steps)")
    cats = collections.defaultdict(lambda: [0.0, 0.0, 0, 0])
    for i, table in enumerate(tables):
        for (op, _), (ms, calls) in table.items():
            c = cats[category(op)]
            c[i] += ms / steps
            c[2 + i] += calls // steps
    totals = [sum(c[i] for c in cats.values()) for i in (0, 1)]
    print(f"{'category':<15} {names[0][:22]:>22} {names[1][:22]:>22} {'diff':>8}   calls/step")
    for name, (a, b, ca, cb) in sorted(cats.items(), key=lambda kv: -abs(kv[1][1] - kv[1][0])):
        print(f"{name:<15} {a:22.1f} {b:22.1f} {b - a:+8.1f}   {ca} / {cb}")
    print(f"{'total':<15} {totals[0]:22.1f} {totals[1]:22.1f} {totals[1] - totals[0]:+8.1f}")
    factor = 3 if mode == "train" else 1
    for i, name in enumerate(names):
        gemm_ms = cats["matmul/conv"][i]
        flops = 2 * macs[i] * factor * batch_size  # FLOPs per step by the bench convention (2 per MAC, x3 train)
        print(
            f"{name}: {macs[i] / 1e9:.3f} GMACs/image; matmul/conv {gemm_ms / totals[i]:.0%} of op time, "
            f"{flops / gemm_ms / 1e6:.1f} GFLOP/s inside them; all ops {flops / totals[i] / 1e6:.1f} GFLOP/s"
        )
    by_op = collections.defaultdict(lambda: [0.0, 0.0, 0, 0, set()])
    for i, table in enumerate(tables):
        for (op, shapes), (ms, calls) in table.items():
            e = by_op[op]
            e[i] += ms / steps
            e[2 + i] += calls // steps
    print("\nops with the largest difference (ms per step; calls per step):")
    for op, (a, b, ca, cb, _) in sorted(by_op.items(), key=lambda kv: -abs(kv[1][1] - kv[1][0]))[:14]:
        print(f"  {op:<48} {a:8.1f} {b:8.1f} {b - a:+8.1f}   {ca} / {cb}")
    print(f"\ncopies in {names[1]} (cat / copy_ / slice_backward / clone / contiguous / index), by input shapes:")
    rows = [
        (ms / steps, calls // steps, op, shapes)
        for (op, shapes), (ms, calls) in tables[1].items()
        if category(op) == "data movement" and ms / steps > 0.5
    ]
    for ms, calls, op, shapes in sorted(rows, reverse=True)[:12]:
        print(f"  {ms:7.1f} ms  x{calls:<4} {op:<24} {shapes}")
    return cats, totals


class LivePeak(TorchDispatchMode):
    """Peak bytes of storages returned by aten ops alive at the same time, and which ops made them."""

    def __init__(self):
        super().__init__()
        self.live: dict[int, tuple[int, str, tuple]] = {}
        self.refs: dict[int, int] = {}
        self.current = self.peak = 0
        self.at_peak: list = []

    def _release(self, ptr):
        self.refs[ptr] -= 1
        if self.refs[ptr] == 0:
            self.current -= self.live.pop(ptr)[0]
            del self.refs[ptr]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                storage = t.untyped_storage()
                ptr = storage.data_ptr()
                if ptr == 0:
                    continue
                if ptr not in self.live:
                    self.live[ptr] = (storage.nbytes(), str(func.overloadpacket).replace("aten.", ""), tuple(t.shape))
                    self.refs[ptr] = 0
                    self.current += storage.nbytes()
                    if self.current > self.peak:
                        self.peak = self.current
                        self.at_peak = list(self.live.values())
                self.refs[ptr] += 1
                weakref.finalize(t, self._release, ptr)
        return out


def report_memory(participants, batch_size):
    print(f"\n## memory at batch {batch_size}")
    for p in participants:
        model = build(p, "cpu").eval()
        x = torch.randn(batch_size, *p.input_size)
        tracker = LivePeak()
        with torch.no_grad(), tracker:
            model(x)
        by_op = collections.Counter()
        for nbytes, op, _ in tracker.at_peak:
            by_op[op] += nbytes
        top = ", ".join(f"{op} {b / 2**20:.0f}" for op, b in by_op.most_common(5))
        print(
            f"{p.label}: inference live-activation peak {tracker.peak / 2**20:.0f} MiB; alive at the peak (MiB): {top}"
        )
        biggest = sorted(tracker.at_peak, reverse=True)[:4]
        print(
            "    largest tensors alive at the peak: "
            + "; ".join(f"{op} {list(shape)} {n / 2**20:.0f} MiB" for n, op, shape in biggest)
        )
        saved, owner = {}, {}
        stack = ["(top)"]
        # innermost module running when autograd saves a tensor; block indices folded (blocks.3 -> blocks.*)
        names = {
            m: ".".join("*" if part.isdigit() else part for part in n.split(".")) or "(top)"
            for n, m in model.named_modules()
        }
        hooks = [
            m.register_forward_pre_hook(lambda module, args: stack.append(f"{names[module]} ({type(module).__name__})"))
            for m in names
        ]
        hooks += [m.register_forward_hook(lambda module, args, out: (stack.pop(), None)[1]) for m in names]
        params = {q.untyped_storage().data_ptr() for q in model.parameters()}

        def pack(t):
            ptr = t.untyped_storage().data_ptr()
            if ptr not in params and ptr not in saved:
                saved[ptr] = t.untyped_storage().nbytes()
                owner[ptr] = stack[-1]
            return t

        model.train()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = model(x)
        del out
        for h in hooks:
            h.remove()
        per_module = collections.Counter()
        for ptr, nbytes in saved.items():
            per_module[owner[ptr]] += nbytes
        parts = "; ".join(f"{m} {b / 2**20:.0f}" for m, b in per_module.most_common(8))
        per_class = collections.Counter()
        for name, nbytes in per_module.items():  # a block's submodules counted under the block's own class
            per_class[name.split(" (")[0].split(".*.")[1].split(".")[0] if ".*." in name else name] += nbytes
        parts += "\n    by block part (MiB): " + "; ".join(f"{m} {b / 2**20:.0f}" for m, b in per_class.most_common(6))
        print(
            f"    saved for backward (training forward): {sum(saved.values()) / 2**20:.0f} MiB; by innermost module "
            f"(MiB): {parts}"
        )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", nargs="+", help="steps-train | transnext | MODEL_A MODEL_B")
    parser.add_argument("--mode", choices=["infer", "train"])
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-memory", dest="memory", action="store_false")
    parser.add_argument("--memory-only", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if len(args.what) == 1:
        if args.what[0] not in PRESETS:
            parser.error(f"unknown preset {args.what[0]!r}: {', '.join(PRESETS)} or two model names")
        a, b, mode = PRESETS[args.what[0]]
    else:
        (a, b), mode = args.what[:2], "infer"
    mode = args.mode or mode

    print(f"# {b} vs {a}, {mode}, batch {args.batch_size}, {args.threads} thread(s), torch {torch.__version__}")
    if args.memory_only:
        participants = [Participant(n, {}, input_size_of(n)) for n in (a, b)]
    else:
        participants, profs = profile_pair((a, b), mode, args.batch_size, args.steps, None)
        report_time((a, b), participants, profs, mode, args.steps, args.batch_size)
    if args.memory:
        report_memory(participants, args.batch_size)


if __name__ == "__main__":
    main()
