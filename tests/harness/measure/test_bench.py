"""depthbench bench: what it reports and in which order it runs (never how fast: timings are not asserted)."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
import timm
import torch
from torch import nn

import harness.measure.bench as bench
from harness.measure.bench import measure, run_interleaved
from harness.cli import main as cli_main

from fixtures.files import read_only

pytestmark = pytest.mark.tier(
    "integration", tests=("test_a_paper_models_default_input_size_is_its_own_in_a_fresh_process",)
)

ROOT = Path(__file__).resolve().parents[3]

# timm benchmark.py's columns for `--bench both` with a FLOP count (results/ plots from these names)
TIMM_COLUMNS = [
    "model",
    "infer_samples_per_sec",
    "infer_step_time",
    "infer_batch_size",
    "infer_img_size",
    "infer_gmacs",
    "train_samples_per_sec",
    "train_step_time",
    "train_batch_size",
    "train_img_size",
    "param_count",
]
DIGITS_HORESNET = "configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py"  # model.width=32, 10 classes, 16 px
SCALENET_DEIT_TINY = "configs/scalenet/scalenet-deit-tiny-2x_8xb64-100e_in1k.py"  # the smallest ScaleNet config
FAST = ["--batch-size", "2", "--repeats", "2", "--iters", "1", "--warmup", "0", "--peak-size", "256", "--threads", "1"]


def _mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 16 * 16, 256), nn.ReLU(), nn.Linear(256, 10))


def test_interleaving_is_real():
    calls = []
    steps = {name: (lambda name=name: calls.append(name)) for name in "ABC"}
    times = run_interleaved(steps, warmup=1, iters=2, repeats=3)
    assert calls[:3] == ["A", "B", "C"]  # warm-up
    timed = calls[3:]
    # rounds alternate direction (A B C, C B A, A B C); within a round a model's steps are back to back
    assert timed == ["A", "A", "B", "B", "C", "C", "C", "C", "B", "B", "A", "A", "A", "A", "B", "B", "C", "C"]
    assert {k: len(v) for k, v in times.items()} == {"A": 3, "B": 3, "C": 3}


def test_steps_are_timed_with_the_clock_given():
    """A step's seconds are the difference of the clock read around its chunk (``--clock cpu`` passes the
    process's CPU time): a clock that advances one second per reading gives one second per chunk of two steps."""
    ticks = iter(range(100))
    steps = {"A": lambda: None, "B": lambda: None}
    times = run_interleaved(steps, warmup=0, iters=2, repeats=2, clock=lambda: float(next(ticks)))
    assert times == {"A": [0.5, 0.5], "B": [0.5, 0.5]}


def test_cpu_clock_leaves_out_waiting_and_rows_name_their_clock():
    """``CLOCKS['cpu']`` (the process's CPU time) does not count a step that waits -- as a step waits for a core
    on a loaded machine -- and wall time does; every row says which clock timed it."""
    import time

    from harness.commands.bench import run
    from harness.measure.bench import CLOCKS

    waits = {"wait": lambda: time.sleep(0.2)}
    assert run_interleaved(waits, warmup=0, repeats=1, clock=CLOCKS["wall"])["wait"][0] >= 0.2
    assert run_interleaved(waits, warmup=0, repeats=1, clock=CLOCKS["cpu"])["wait"][0] < 0.1
    for clock in ("cpu", "wall"):
        result = run(["resnet18"], input_size=32, clock=clock, memory=False, batch_size=1, repeats=1, iters=1, warmup=0)
        assert result.rows[0]["clock"] == clock and result.machine["clock"] == clock


def test_command_interleaves_models_and_the_peak_probe(monkeypatch, capsys):
    calls = []

    class Recorder:  # stands in for ModelStep: records which model steps, never computes
        def __init__(self, model, input_size, batch_size, mode, *args, **kwargs):
            self.name = type(model).__name__ + str(sum(p.numel() for p in model.parameters()))

        def __call__(self):
            calls.append(self.name)

    class PeakRecorder(bench.MatmulPeak):
        def __call__(self):
            calls.append("peak")

    monkeypatch.setattr(bench, "ModelStep", Recorder)
    monkeypatch.setattr(bench, "MatmulPeak", PeakRecorder)
    assert (
        cli_main(
            [
                "bench",
                "resnet18",
                "resnet34",
                "--input-size",
                "32",
                "--repeats",
                "4",
                "--iters",
                "1",
                "--warmup",
                "0",
                "--peak-size",
                "8",
                "--no-memory",
                "--threads",
                "1",
            ]
        )
        == 0
    )
    a, b = sorted(set(calls) - {"peak"}, key=calls.index)
    assert calls[:12] == [a, b, "peak", "peak", b, a, a, b, "peak", "peak", b, a]  # then a one-off bf16 peak
    assert "resnet34 / resnet18" not in capsys.readouterr().out  # no pairs without --pairs


def test_both_modes_write_timm_columns_and_utilisation(tmp_path, capsys):
    out = tmp_path / "bench.csv"
    assert (
        cli_main(["bench", "resnet18", "--input-size", "32", "--mode", "both", "--out", str(out), "--no-memory", *FAST])
        == 0
    )
    with open(out) as fh:
        rows = list(csv.DictReader(fh))
    (row,) = rows
    assert [c for c in TIMM_COLUMNS if c not in row] == []
    assert row["model"] == "resnet18" and row["infer_batch_size"] == "2" and row["train_img_size"] == "32"
    assert float(row["param_count"]) == pytest.approx(11.69, abs=0.01)  # millions, as timm writes it
    # GMACs at 32x32: ResNet-18 is 1.82 G at 224 and ~(32/224)^2 of that here
    assert 0.025 < float(row["infer_gmacs"]) < 0.045
    for mode in ("infer", "train"):
        # a ratio of two timings per round, no upper bound: on a shared machine a slowed peak round can pass 1
        # (make test, 28 Nov 2026: 1.12); the timings behind it are checked for order, the formula below
        assert 0 < float(row[f"{mode}_mfu"]) < float("inf")
        assert (
            float(row[f"{mode}_samples_per_sec_q25"])
            <= float(row[f"{mode}_samples_per_sec"])
            <= float(row[f"{mode}_samples_per_sec_q75"])
        )
    assert float(row["train_gflops"]) == pytest.approx(  # the convention: 2 FLOPs per MAC, x3 for training
        6 * float(row["infer_gmacs"]) * float(row["train_samples_per_sec"]), rel=0.05
    )
    assert row["threads"] == "1" and float(row["peak_gflops_fp32"]) > 0
    # what a step allocates, without --memory's processes: training keeps activations for backward, plus gradients
    assert 0 < float(row["infer_peak_mib"]) < float(row["train_peak_mib"])
    # a second run appends: earlier rows are never lost
    assert cli_main(["bench", "resnet18", "--input-size", "32", "--out", str(out), "--no-memory", *FAST]) == 0
    with open(out) as fh:
        assert len(list(csv.DictReader(fh))) == 2


def test_mfu_is_the_median_of_per_round_achieved_over_peak():
    """MFU by hand on known timings: training counts 2 FLOPs per MAC and 3 passes; each round's achieved GFLOP/s is
    divided by the peak measured in the same round, then the median is taken."""
    from harness.measure.presets import Participant

    macs, batch = 10**9, 4  # 1 GMAC a sample
    seconds = [1.0, 2.0, 4.0]
    peak_times, peak_flops = [0.5, 1.0, 1.0], 10**11  # peak rounds of 200, 100, 100 GFLOP/s
    row = bench.summarise(
        {"m": seconds},
        {"m": Participant("m", input_size=(3, 32, 32))},
        {"m": macs},
        batch,
        "train",
        peak_times,
        peak_flops,
    )["m"]
    achieved = [2 * 3 * macs * batch / s / 1e9 for s in seconds]  # 24, 12, 6 GFLOP/s
    per_round = sorted(a / p for a, p in zip(achieved, (200.0, 100.0, 100.0)))  # 0.12, 0.12, 0.06
    assert row["train_mfu"] == pytest.approx(per_round[1]) == pytest.approx(0.12)
    assert row["train_gflops"] == pytest.approx(12.0)
    assert row["train_samples_per_sec"] == pytest.approx(2.0)


def test_cpu_memory_is_measured_in_a_fresh_process():
    # ResNet-18's training step at batch 8, 64x64 keeps ~40 MiB of activations for backward (stem output alone:
    # 8 x 64 x 32 x 32 fp32 = 2 MiB per saved tensor, ~20 of them at that size)
    participant = bench.Participant("resnet18", {}, (3, 64, 64))
    train = bench.memory_in_subprocess(participant, "train", 8, None, False, threads=1)
    assert 20 < train < 2000


def test_config_rebuilds_the_trained_model(tmp_path):
    # the digits preset trains horesnet10_rk4 with width=32 on 16x16 images of 10 classes
    (p,) = bench.resolve([], config=DIGITS_HORESNET)[0]
    assert p.name == "horesnet10_rk4" and p.kwargs["width"] == 32 and p.input_size == (3, 16, 16)
    import models  # noqa: F401

    expected = timm.create_model("horesnet10_rk4", width=32, num_classes=10)
    trained_like = bench.build(p, device="cpu")
    trained_like.load_state_dict(expected.state_dict())  # same architecture: every key and shape fits
    # and the command runs it, with --model-kwargs on top of the config's
    out = tmp_path / "c.csv"
    assert (
        cli_main(
            [
                "bench",
                "--config",
                DIGITS_HORESNET,
                "--model-kwargs",
                "width=16",
                "--out",
                str(out),
                "--no-memory",
                *FAST,
            ]
        )
        == 0
    )
    with open(out) as fh:
        (row,) = csv.DictReader(fh)
    assert row["model"] == "horesnet10_rk4" and '"width": 16' in row["model_kwargs"] and row["infer_img_size"] == "16"


def test_scalenet_config_measures_the_expanded_model(capsys):
    # ScaleNet configs train deit_tiny_patch16_224 deepened 2x by `model.grow` (weight sharing + rank-16 adapters):
    # bench must measure that model, not the 12-block base it starts from
    from models.scalenet import expand

    import models  # noqa: F401

    base = timm.create_model("deit_tiny_patch16_224")
    expanded = expand(timm.create_model("deit_tiny_patch16_224"), k=2, order="interpolate", adjust="adapter", rank=16)
    assert len(expanded.blocks) == 2 * len(base.blocks)
    assert (
        cli_main(
            [
                "bench",
                "--config",
                SCALENET_DEIT_TINY,
                "--json",
                "--no-memory",
                "--batch-size",
                "1",
                "--repeats",
                "1",
                "--iters",
                "1",
                "--warmup",
                "0",
                "--peak-size",
                "64",
                "--threads",
                "1",
            ]
        )
        == 0
    )
    (row,) = json.loads(capsys.readouterr().out)["models"]
    params = float(row["param_count"])  # millions; shared weights once (model.parameters() yields each once)
    assert params == round(sum(p.numel() for p in expanded.parameters()) / 1e6, 3)
    assert params > round(sum(p.numel() for p in base.parameters()) / 1e6, 3) + 0.7
    assert params == pytest.approx(6.45, abs=0.02)  # ScaleNet Table I, DeiT-Tiny ScaleNet: 6.45 M
    # twice the depth: about twice DeiT-T's 1.3 GMACs (Table I: 2.6 G without the adapters' MACs)
    assert 2.5 < float(row["infer_gmacs"]) < 2.9


def test_pair_presets_resolve_to_registered_models():
    import models  # noqa: F401

    for key, (participants, pairs) in bench.PRESETS.items():
        labels = {p.label for p in participants}
        assert pairs and all(pair.baseline in labels and pair.candidate in labels for pair in pairs), key
        for p in participants:
            assert timm.is_model(p.name), (key, p.name)
            if p.kwargs:  # a preset's keywords are ones the model takes
                bench.build(p)
        assert all(pair.claim for pair in pairs)
    participants, pairs = bench.preset("stepsnet")  # a paper name selects every group of that paper
    assert {"steps_deit_small", "steps_swin_tiny", "steps_resnet50", "steps_deit_w136_d96"} <= {
        p.label for p in participants
    }
    assert len({p.label for p in participants}) == len(participants)


def test_pairs_report_ratios_with_claims(capsys, monkeypatch):
    monkeypatch.setitem(
        bench.PRESETS,
        "toy:pair",
        (
            [bench.Participant("resnet18", {}, (3, 32, 32)), bench.Participant("resnet34", {}, (3, 32, 32))],
            [bench.Pair("resnet18", "resnet34", "toy claim (Table 0)")],
        ),
    )
    monkeypatch.setattr(bench, "PAPERS", [*bench.PAPERS, "toy"])
    assert cli_main(["bench", "--pairs", "toy", "--no-memory", *FAST]) == 0
    out = capsys.readouterr().out
    assert "resnet34 / resnet18: GMACs 2.0" in out and "paper: toy claim (Table 0)" in out


def test_a_second_pairs_run_appends_to_the_pairs_csv(tmp_path, monkeypatch):
    """Found by the GPU check on a GPU: a second `bench --pairs ... --out X.csv` refused its own X_pairs.csv
    (it looked for a 'model' column, which only the per-model CSV has)."""
    import csv

    monkeypatch.setitem(
        bench.PRESETS,
        "toy:pair",
        (
            [bench.Participant("resnet18", {}, (3, 32, 32)), bench.Participant("resnet34", {}, (3, 32, 32))],
            [bench.Pair("resnet18", "resnet34", "toy claim (Table 0)")],
        ),
    )
    monkeypatch.setattr(bench, "PAPERS", [*bench.PAPERS, "toy"])
    out = tmp_path / "b.csv"
    for _ in range(2):
        assert cli_main(["bench", "--pairs", "toy", "--no-memory", "--out", str(out), *FAST]) == 0
    with open(tmp_path / "b_pairs.csv", newline="") as fh:
        assert [r["candidate"] for r in csv.DictReader(fh)] == ["resnet34", "resnet34"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["bench", "transnext_tinyy"], "unknown model 'transnext_tinyy'; did you mean transnext_tiny"),
        (["bench", "resnet18", "--model-kwargs", "depth"], "--model-kwargs 'depth' is not key=value"),
        (["bench", "resnet18", "--model-kwargs", "widht=32"], "model resnet18 does not build with {'widht': 32}"),
        (["bench", "--config", "configs/nope.py"], "config file configs/nope.py does not exist"),
        (["bench", "--pairs", "stepnet"], "unknown --pairs preset 'stepnet'; did you mean stepsnet"),
        (["bench", "resnet18", "--batch-size", "0"], "--batch-size must be at least 1"),
        (["bench", "resnet18", "--threads", "999"], "--threads 999: this process may use"),
        (["bench"], "name at least one model"),
        (["bench", "resnet18", "model.width=3"], "key=value overrides (model.width=3) need --config"),
        (["bench", "--config", DIGITS_HORESNET, "model.widht=8"], "unknown config key 'model.widht'"),
        (["bench", "steps_deit_small", "--input-size", "100"], "--model-kwargs img_size=100"),
        (["bench", "resnet18", "--clock", "cpu", "--device", "cuda"], "--clock"),
    ],
)
def test_bad_input_is_one_line_exit_2(argv, message, capsys):
    assert cli_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("depthbench bench: error: ") and message in err, err


def test_out_that_is_not_a_csv_is_refused_before_work(tmp_path, capsys):
    bad = tmp_path / "results.csv"
    bad.write_bytes(b"\xff\xfe\x00garbage")
    assert cli_main(["bench", "resnet18", "--out", str(bad)]) == 2
    assert "is not a readable CSV" in capsys.readouterr().err
    assert bad.read_bytes() == b"\xff\xfe\x00garbage"  # untouched


def test_out_that_cannot_be_written_is_refused_before_work(tmp_path, capsys, monkeypatch):
    """Really unwritable, root included (CI runs as root, and os.access says yes to root): the check creates a file
    in the folder and opens an existing CSV for appending."""
    monkeypatch.setattr(bench, "benchmark", lambda *a, **k: pytest.fail("measured before checking --out"))
    folder = tmp_path / "ro"
    folder.mkdir()
    kept = folder / "kept.csv"
    kept.write_text("model\nresnet18\n")
    with read_only(folder):
        for out in (folder / "bench.csv", folder / "new" / "bench.csv"):
            assert cli_main(["bench", "resnet18", "--out", str(out)]) == 2
            err = capsys.readouterr().err.strip()
            assert len(err.splitlines()) == 1 and f"--out {out}: cannot write in {folder}" in err, err
    writable = tmp_path / "bench.csv"
    writable.write_text("model\nresnet18\n")
    with read_only(writable):  # its folder writable, the file not (it is replaced: an immutable file cannot be)
        assert cli_main(["bench", "resnet18", "--out", str(writable)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"cannot write {writable}" in err, err
    assert kept.read_text() == writable.read_text() == "model\nresnet18\n"


@pytest.mark.parametrize("mode", ["infer", "train"])
def test_measure_reports_throughput_and_memory(mode):
    model = _mlp()
    before = [p.detach().clone() for p in model.parameters()]
    result = measure(model, 16, batch_size=4, mode=mode, warmup=1, iters=2)
    assert result["samples_per_s"] > 0 and result["step_ms"] > 0 and result["batch_size"] == 4
    assert result["peak_mem_mb"] >= 0
    changed = any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert changed == (mode == "train")  # a training step really updates the weights, inference does not


def test_step_peak_counts_the_running_total_of_allocations():
    def step():  # 4 MiB, +1 MiB (peak 5), free the 4, +2 MiB (3): the peak is the running total's, not the sum's
        a = torch.empty(4 * 2**20, dtype=torch.uint8)
        b = torch.empty(2**20, dtype=torch.uint8)
        del a
        c = torch.empty(2 * 2**20, dtype=torch.uint8)
        del b, c

    assert bench.step_peak_mib(step) == 5


def test_peak_mib_is_what_a_step_allocates():
    # inference: the one activation is the linear layer's output, 64 x 4096 fp32 = 1 MiB (flatten is a view)
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 16 * 16, 4096))
    assert measure(model, 16, batch_size=64, mode="infer", warmup=1, iters=1)["peak_mib"] == pytest.approx(1, rel=0.01)
    # training: the output (kept for the loss), the weight's gradient (768 x 4096 fp32 = 12 MiB) and the bias's
    # (16 KiB); the mean's gradient is an expanded scalar, the momentum buffers were made in the warm-up step and
    # the weights existed before: none of them counts
    train = measure(model, 16, batch_size=64, mode="train", warmup=1, iters=1)["peak_mib"]
    assert train == pytest.approx(1 + 12 + 4096 * 4 / 2**20, rel=0.001)


def test_training_memory_is_seen_on_cpu():
    """A large activation (16 x 64 x 128 x 128 fp32 = 64 MiB per step) shows up in the CPU peak, asserted on the
    deterministic number: the step's tensor allocations (``peak_mib``, the profiler's events). measure's
    ``peak_mem_mb`` is RSS growth sampled every 2 ms in this process, which depends on what ran before (memory an
    earlier test freed is reused without growing RSS: a written 64 MiB tensor grew it by 8 KiB after the file's
    other tests) and on the sampler getting the CPU: not asserted here; RSS is asserted where it is meaningful, in a
    fresh process (test_cpu_memory_is_measured_in_a_fresh_process)."""
    activation_mib = 16 * 64 * 128 * 128 * 4 / 2**20
    model = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    result = measure(model, 128, batch_size=16, mode="train", warmup=1, iters=1)
    # the forward holds the convolution's output and the ReLU's (kept for the backward) at once
    assert result["peak_mib"] >= 2 * activation_mib
    with pytest.raises(ValueError, match="mode"):
        measure(_mlp(), 16, mode="fast")


def test_a_paper_models_default_input_size_is_its_own_in_a_fresh_process():
    """`depthbench bench --pairs horesnet:schemes` ran HO-ResNet at 224² (49x its 32² cost): the size was looked
    up before the paper models' cfgs were registered. A fresh interpreter has imported nothing yet."""
    code = "from harness.measure.catalog import default_input_size as d; print(d('horesnet58_euler'), d('SReT_T'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[-2] == "(3, 32, 32) (3, 224, 224)", out.stdout


@pytest.mark.slow
@pytest.mark.tier("integration")
def test_bench_memory_process_runs_the_variant_it_measures(one_thread):
    """The CPU memory process builds the participant with its options (grad checkpointing here) and returns MiB."""
    from harness.measure.bench import Participant, memory_in_subprocess

    p = Participant("resnet18", {}, (3, 16, 16))
    plain = memory_in_subprocess(p, "train", 2, None, False, 1)
    checkpointed = memory_in_subprocess(p, "train", 2, None, False, 1, grad_checkpointing=True, optimizer="adamw-fused")
    assert plain > 0 and checkpointed > 0
