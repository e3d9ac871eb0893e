"""harness/measure/preflight/allreduce.py: the transport NCCL chose, read from its log, and the node under half its
peers' all-reduce bandwidth."""

IB_LOG = """node1:123:456 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.1.0.5<0>
node1:123:456 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IB/0/GDRDMA
node1:123:456 [0] NCCL INFO comm 0x1 rank 0 nranks 16 cudaDev 0 busId 1000 - Init COMPLETE"""


SOCKET_LOG = """node2:9:9 [0] NCCL INFO NET/IB : No device found.
node2:9:9 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.7<0>
node2:9:9 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0"""


def test_nccl_transport_from_its_log():
    from harness.measure.preflight import nccl_transport

    assert nccl_transport(IB_LOG) == {
        "transport": "InfiniBand",
        "gdr": True,
        "interface": "[0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.1.0.5<0>",
    }
    roce = nccl_transport("x NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:10.0.0.1<0>")
    assert roce["transport"] == "RoCE" and roce["gdr"] is False
    sockets = nccl_transport(SOCKET_LOG)
    assert sockets["transport"] == "TCP sockets" and sockets["interface"].startswith("[0]eth0") and not sockets["gdr"]
    assert nccl_transport("nothing")["transport"].startswith("unknown")


def test_transport_check_warns_when_nccl_falls_back_to_sockets():
    from harness.measure.preflight import nccl_transport, transport_check

    ok = transport_check([{"node": "a", **nccl_transport(IB_LOG)}, {"node": "b", **nccl_transport(IB_LOG)}], "nccl", 2)
    assert ok.verdict == "ok" and "InfiniBand; GPUDirect RDMA on" in ok.text
    bad = transport_check(
        [{"node": "a", **nccl_transport(IB_LOG)}, {"node": "b", **nccl_transport(SOCKET_LOG)}], "nccl", 2
    )
    assert bad.verdict == "warn" and "fell back to sockets" in bad.text and "do not agree" in bad.text
    gloo = transport_check([{"node": "n1", "transport": "gloo over TCP sockets", "gdr": None}], "gloo", 2)
    assert gloo.verdict == "ok" and gloo.text == "gloo between 2 node(s): gloo over TCP sockets"


def test_a_node_under_half_its_peers_bandwidth_fails():
    from harness.measure.preflight import pair_checks, slow_nodes

    def ring(bandwidth):  # a pair runs at the slower node's speed
        nodes = list(bandwidth)
        return [
            {"nodes": [a, b], "busbw_gbs": min(bandwidth[a], bandwidth[b])}
            for a, b in zip(nodes, nodes[1:] + nodes[:1])
        ]

    best, slow = slow_nodes(ring({"n1": 20.0, "n2": 21.0, "n3": 6.0, "n4": 19.0}))
    assert slow == ["n3"] and best == {"n1": 20.0, "n2": 20.0, "n3": 6.0, "n4": 19.0}  # a pair: its slower node
    assert slow_nodes(ring({"n1": 20.0, "n2": 12.0, "n3": 19.0}))[1] == []  # 12 >= half of 19.5
    (check,) = pair_checks(ring({"n1": 20.0, "n2": 21.0, "n3": 6.0, "n4": 19.0}), 4)
    assert check.verdict == "fail" and check.text.startswith("n3: all-reduce bus bandwidth under 50%")
    assert "--sbatch=--exclude=n3" in check.text
    (two,) = pair_checks([], 2)
    assert two.verdict == "ok" and "needs 3 or more" in two.text
