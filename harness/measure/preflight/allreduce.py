"""The network checks of all ranks together. Every rank takes part in :func:`allreduce_sweep`: all-reduce bus
bandwidth over message sizes as nccl-tests reports it (busbw = algbw x 2(n-1)/n; NCCL between GPUs, gloo between
CPUs), each config's gradients, the transport between nodes as NCCL's log names it (:func:`nccl_transport`) and,
with 3 or more nodes, each pair of neighbouring nodes (:func:`slow_nodes`: a node under half its peers' median
fails). Rank 0 turns the result into ``all-reduce``, ``transport``, ``node-bandwidth`` and ``grad-sync`` lines
(:func:`allreduce_checks`)."""

from __future__ import annotations

import datetime as _dt
import os
import re
import socket
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist

from harness.measure.preflight.common import MIB, Check, Options, one_line, size_text
from harness.measure.preflight.group import Group
from harness.measure.preflight.plan import Plan

SLOW_NODE_FRACTION = 0.5  # a node whose pairwise all-reduce bandwidth is under half its peers' median fails


# ----------------------------------------------------------------------------------------------- every rank
def allreduce_sweep(group: Group, opts: Options, plans: list[Plan], nccl: bool) -> dict:
    """Every rank: all-reduce of each message size and of each model's gradients; the slowest rank's time."""
    if group.world == 1:
        return {"backend": None, "ranks": 1, "rows": [], "grad": {}}
    backend = "nccl" if nccl else "gloo"
    nccl_log = _nccl_debug_to_file() if nccl else None  # NCCL reads it when the group's communicator starts
    sub = dist.new_group(backend="nccl", timeout=_dt.timedelta(seconds=group.timeout_s)) if nccl else None
    device = torch.device("cuda", torch.cuda.current_device()) if nccl else torch.device("cpu")
    result = {"backend": backend, "ranks": group.world, "rows": [], "grad": {}, "error": None, "correct": None}
    try:
        probe = torch.full((1024,), float(dist.get_rank() + 1), device=device)
        dist.all_reduce(probe, group=sub)
        expected = group.world * (group.world + 1) / 2
        result["correct"] = bool(torch.allclose(probe.cpu(), torch.full((1024,), expected)))
        sizes = sorted({int(m * MIB) for m in opts.allreduce_mib})
        grads = {p.label: 4 * p.params for p in plans if p.params}
        for nbytes in sizes + sorted(set(grads.values()) - set(sizes)):
            seconds = _time_allreduce(nbytes, device, sub)
            result["rows"].append(_bandwidth_row(nbytes, seconds, group.world))
        result["rows"].sort(key=lambda r: r["bytes"])
        by_size = {r["bytes"]: r for r in result["rows"]}
        result["grad"] = {label: by_size[n] for label, n in grads.items()}
        result["transport"] = _transport(group, nccl_log)
        result["pairs"] = _pair_bandwidths(group, device, nccl, max(sizes))
    except Exception as e:  # a broken link: a fail line, and the other checks still run
        result["error"] = one_line(e)
    finally:
        if sub is not None:
            dist.destroy_process_group(sub)
    return result


def _time_allreduce(nbytes: int, device, sub) -> float:
    buffer = torch.ones(max(1, nbytes // 4), dtype=torch.float32, device=device)
    iters = 10 if nbytes <= 16 * MIB else 5
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for _ in range(2):
        dist.all_reduce(buffer, group=sub)
    sync()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(buffer, group=sub)
    sync()
    seconds = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float64)
    dist.all_reduce(seconds, op=dist.ReduceOp.MAX)  # nccl-tests reports the slowest rank
    return float(seconds.item())


def _transport(group: Group, nccl_log: Path | None) -> list:
    """Every rank's view of the transport between nodes (:func:`nccl_transport` of its NCCL log; gloo: TCP)."""
    if nccl_log is None:
        mine = {
            "transport": "gloo over TCP sockets",
            "gdr": None,
            "interface": os.environ.get("GLOO_SOCKET_IFNAME"),
        }  # None: the hostname's address
    elif nccl_log == Path():
        mine = {"transport": "unknown (NCCL_DEBUG is set: see NCCL's own INFO lines)", "gdr": None}
    else:
        text = "".join(f.read_text(errors="replace") for f in nccl_log.parent.glob(nccl_log.name + "*"))
        mine = nccl_transport(text)
    views = [None] * group.world
    dist.all_gather_object(views, {"node": os.environ.get("SLURMD_NODENAME") or socket.gethostname(), **mine})
    return views


def _pair_bandwidths(group: Group, device, nccl: bool, nbytes: int) -> list:
    """All-reduce bus bandwidth between neighbouring nodes on a ring of the nodes (their first ranks), one
    pair at a time -- (0,1), (1,2), ..., (n-1,0) -- so each node is measured with two different peers: a slow
    node shows in both of its pairs, a good one in at most one. Needs 3 nodes (with 2 there is one pair:
    nobody to compare with); [] otherwise."""
    nodes = [None] * group.world
    dist.all_gather_object(nodes, os.environ.get("SLURMD_NODENAME") or socket.gethostname())
    order = list(dict.fromkeys(nodes))
    if len(order) < 3:
        return []
    leaders = [nodes.index(n) for n in order]
    pairs = [(i, (i + 1) % len(order)) for i in range(len(order))]
    me, results = dist.get_rank(), []
    for a, b in pairs:  # every rank creates every group, in the same order (torch.distributed's rule)
        ranks = sorted({leaders[a], leaders[b]})
        sub = dist.new_group(ranks, backend="nccl" if nccl else "gloo", timeout=_dt.timedelta(seconds=group.timeout_s))
        if me in ranks:
            buffer = torch.ones(max(1, nbytes // 4), dtype=torch.float32, device=device)
            for _ in range(2):
                dist.all_reduce(buffer, group=sub)
            sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
            sync()
            start = time.perf_counter()
            for _ in range(5):
                dist.all_reduce(buffer, group=sub)
            sync()
            seconds = (time.perf_counter() - start) / 5
            if me == ranks[0]:
                results.append({"nodes": [order[a], order[b]], **_bandwidth_row(nbytes, seconds, 2)})
        dist.destroy_process_group(sub)
    gathered = [None] * group.world
    dist.all_gather_object(gathered, results)
    return [r for part in gathered for r in part]


def _bandwidth_row(nbytes: int, seconds: float, ranks: int) -> dict:
    """nccl-tests' all-reduce columns: algbw = bytes / time, busbw = algbw x 2(n-1)/n (GB/s = 1e9 B/s)."""
    algbw = nbytes / seconds / 1e9
    return {
        "bytes": nbytes,
        "count": nbytes // 4,
        "type": "float",
        "time_ms": _sig(1000 * seconds),
        "algbw_gbs": _sig(algbw),
        "busbw_gbs": _sig(algbw * 2 * (ranks - 1) / ranks),
    }


def _sig(x: float) -> float:
    return float(f"{x:.5g}")  # significant digits: latency-bound sizes run at MB/s, large ones at hundreds of GB/s


# ----------------------------------------------------------------------------------------------- NCCL's log
def _nccl_debug_to_file() -> Path:
    """Point NCCL's INFO log (init and network) at a file of this process, to read the transport from; Path()
    when the user set NCCL_DEBUG (their log goes where they asked; we do not take it over)."""
    if os.environ.get("NCCL_DEBUG"):
        return Path()
    folder = Path(tempfile.mkdtemp(prefix="depthbench-nccl-"))
    os.environ.update(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT,NET", NCCL_DEBUG_FILE=str(folder / "nccl.%p.log"))
    return folder / f"nccl.{os.getpid()}.log"


def nccl_transport(log: str) -> dict:
    """What NCCL says it uses between nodes, from its INFO lines: ``NET/IB : Using [0]mlx5_0:1/IB`` (InfiniBand)
    or ``.../RoCE``, ``NET/Socket : Using [0]eth0:...`` (TCP sockets), ``NET/OFI`` / a plugin (libfabric: EFA,
    Slingshot); GPUDirect RDMA from ``GPU Direct RDMA Enabled`` or a ``GDRDMA`` channel."""
    transport, interface = None, None
    for line in log.splitlines():
        m = re.search(r"NET/IB\s*:\s*Using\s+(.*)", line)
        if m:
            kinds = set(re.findall(r"/(IB|RoCE)\b", m.group(1)))
            transport = "RoCE" if kinds == {"RoCE"} else "InfiniBand" + (" + RoCE" if "RoCE" in kinds else "")
            interface = re.sub(r"\s+", " ", m.group(1)).strip()[:120]
            break
        m = re.search(r"NET/Socket\s*:\s*Using\s+(.*)", line)
        if m and transport is None:
            transport, interface = "TCP sockets", m.group(1).strip()[:120]
        m = re.search(r"NET/(OFI|AWS Libfabric|Plugin)\b", line)
        if m and transport is None:
            transport = "libfabric (OFI)" if m.group(1) != "Plugin" else "a NCCL net plugin"
    gdr = bool(re.search(r"GPU Direct RDMA Enabled|/GDRDMA", log)) if transport else None
    if transport is None:
        transport = (
            "no network between nodes (one node: NVLink/PCIe/shared memory)"
            if "Init COMPLETE" in log or "comm " in log
            else "unknown (no NCCL network line in its log)"
        )
    return {"transport": transport, "interface": interface, "gdr": gdr}


# ----------------------------------------------------------------------------------------------- rank 0: the lines
def allreduce_checks(gathered: list[dict], collective: dict, plans: list[Plan]) -> list[Check]:
    """``all-reduce``, ``transport``, ``node-bandwidth`` and each plan's ``grad-sync`` from :func:`allreduce_sweep`'s
    result (``collective``) and every rank's gathered step times."""
    checks = []
    ranks = collective.get("ranks", 1)
    if ranks == 1:
        checks.append(
            Check("all-reduce", "ok", "1 rank: nothing to all-reduce (no gradient synchronisation)", 0, "GB/s")
        )
        return checks
    backend, rows = collective["backend"], collective.get("rows") or []
    nodes = len({g["node"] for g in gathered})
    if collective.get("error") or not rows:
        checks.append(
            Check(
                "all-reduce",
                "fail",
                f"{backend} all-reduce over {ranks} ranks failed: "
                f"{collective.get('error') or 'no result'}; check the network between the nodes "
                f"(NCCL_DEBUG=INFO, NCCL_SOCKET_IFNAME)",
                None,
                "GB/s",
            )
        )
        return checks
    if collective.get("correct") is False:
        checks.append(
            Check("all-reduce", "fail", f"{backend} all-reduce over {ranks} ranks returned a wrong sum", None, "GB/s")
        )
    best = max(rows, key=lambda r: r["busbw_gbs"])
    text = (
        f"{backend}, {ranks} ranks on {nodes} node(s): bus bandwidth {best['busbw_gbs']:,.2f} GB/s at "
        f"{size_text(best['bytes'])} (algbw {best['algbw_gbs']:,.2f} GB/s; nccl-tests' busbw = algbw x 2(n-1)/n)"
    )
    verdict = "ok"
    if backend == "nccl" and nodes > 1 and best["busbw_gbs"] < 5:
        verdict, text = (
            "warn",
            (
                text + ": slower than a 40 Gb/s link; is NCCL on the fast interconnect? "
                "(NCCL_DEBUG=INFO shows the transport)"
            ),
        )
    checks.append(Check("all-reduce", verdict, text, best["busbw_gbs"], "GB/s", data={"rows": rows}))
    checks.append(transport_check(collective.get("transport") or [], backend, nodes))
    checks += pair_checks(collective.get("pairs") or [], nodes)
    checks += _grad_sync_checks(gathered, collective, plans)
    return checks


def transport_check(views: list[dict], backend: str, nodes: int) -> Check:
    """One line: what carries the all-reduce between nodes, as each node's NCCL (or gloo) reports it."""
    if not views:
        return Check("transport", "ok", f"{backend}: no transport reported", None, "")
    kinds = sorted({v.get("transport") or "?" for v in views})
    gdr = {v.get("gdr") for v in views}
    text = f"{backend} between {nodes} node(s): {', '.join(kinds)}"
    if backend == "nccl":
        text += (
            "; GPUDirect RDMA on"
            if gdr == {True}
            else "; GPUDirect RDMA off"
            if gdr == {False}
            else "; GPUDirect RDMA on some ranks only"
            if True in gdr
            else ""
        )
    interfaces = sorted({str(v.get("interface")) for v in views if v.get("interface")})
    if interfaces:
        text += f" (via {', '.join(interfaces[:3])})"
    verdict = "ok"
    if backend == "nccl" and nodes > 1 and any(k == "TCP sockets" for k in kinds):
        verdict, text = (
            "warn",
            text + ": NCCL fell back to sockets between nodes; is the InfiniBand/RoCE driver "
            "loaded and NCCL_IB_DISABLE unset?",
        )
    if len(kinds) > 1:
        verdict, text = "warn", text + ": the nodes do not agree on one transport"
    return Check("transport", verdict, text, None, "", data={"views": views})


def slow_nodes(pairs: list[dict], fraction: float = SLOW_NODE_FRACTION) -> tuple[dict, list[str]]:
    """``({node: its best pair bandwidth}, [nodes under fraction x the median of the others' best])``."""
    best: dict[str, float] = {}
    for row in pairs:
        for node in row["nodes"]:
            best[node] = max(best.get(node, 0.0), row["busbw_gbs"])
    slow = [
        n
        for n, bw in best.items()
        if len(best) > 2 and bw < fraction * statistics.median([v for m, v in best.items() if m != n])
    ]
    return best, slow


def pair_checks(pairs: list[dict], nodes: int) -> list[Check]:
    """``node-bandwidth`` from :func:`_pair_bandwidths`' rows: fail naming each slow node (:func:`slow_nodes`)."""
    if nodes < 3:
        return (
            [
                Check(
                    "node-bandwidth",
                    "ok",
                    f"{nodes} node(s): the per-node bandwidth rule needs 3 or more (a "
                    "slow node is one under {:.0%} of its peers' median; with 2 there is no one to compare)".format(
                        SLOW_NODE_FRACTION
                    ),
                    None,
                    "",
                )
            ]
            if nodes == 2
            else []
        )
    best, slow = slow_nodes(pairs)
    text = ", ".join(f"{n} {bw:,.2f}" for n, bw in best.items())
    if slow:
        return [
            Check(
                "node-bandwidth",
                "fail",
                f"{', '.join(slow)}: all-reduce bus bandwidth under "
                f"{SLOW_NODE_FRACTION:.0%} of the other nodes' median (GB/s by node, best pair: {text}); "
                f"exclude it (--sbatch=--exclude={','.join(slow)}) or have it checked",
                len(slow),
                "nodes",
                data={"pairs": pairs},
            )
        ]
    return [
        Check(
            "node-bandwidth",
            "ok",
            f"every node within {SLOW_NODE_FRACTION:.0%} of its peers' median (GB/s by node, best pair: {text})",
            0,
            "nodes",
            data={"pairs": pairs},
        )
    ]


def _grad_sync_checks(gathered: list[dict], collective: dict, plans: list[Plan]) -> list[Check]:
    """``grad-sync`` per plan: its gradients' all-reduce time against the slowest rank's step."""
    checks = []
    steps = {}
    for g in gathered:
        for label, m in g["measured"].items():
            if m.get("step_ms"):
                steps[label] = max(steps.get(label, 0), m["step_ms"])
    for plan in plans:
        row = (collective.get("grad") or {}).get(plan.label)
        if not row:
            continue
        step = steps.get(plan.label)
        text = (
            f"{plan.label}: {size_text(row['bytes'])} of fp32 gradients all-reduced in {row['time_ms']:,.1f} ms "
            f"(busbw {row['busbw_gbs']:,.2f} GB/s)"
        )
        if not step:
            checks.append(
                Check("grad-sync", "ok", text + "; no step time to compare", row["time_ms"], "ms", plan.label)
            )
            continue
        share = row["time_ms"] / step
        text += f" = {share:.0%} of the {step:,.1f} ms step"
        if share <= 0.5:
            verdict = "ok"
        else:
            verdict = "warn"
            text += (
                ": DDP overlaps it with the backward pass only in part; expect slower steps (a larger batch per "
                "device, grad_accum or a faster interconnect helps)"
                if share <= 1
                else ": communication-bound; a larger batch per device, grad_accum or a faster interconnect"
            )
        checks.append(Check("grad-sync", verdict, text, share, "x step", plan.label, data={"time_ms": row["time_ms"]}))
    return checks
