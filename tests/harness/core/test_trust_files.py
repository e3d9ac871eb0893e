"""Issue 39, the file-access half: a run directory, a record, a cache or a report that a user receives is data.
Depthbench opens such files one way (harness.core.files): never through a link, never a FIFO or device (and never
blocks on one), never a huge or deeply nested file, and every refusal is one line naming the file. Data roots are
walked without leaving the root or looping; undecodable images name their file; record strings are printed without
control characters.

Each test builds the crafted input that got through before this pass (checked against the code before it). Every
call that could hang on a FIFO runs under a timeout (``_in_time``), so a regression fails instead of blocking.
"""

from __future__ import annotations

import json
import os
import subprocess
import warnings
from pathlib import Path

import pytest

from clitools import run_cli_here
from fixtures.files import in_time as _in_time  # fails a test that blocks (a FIFO opened, a link loop walked)
from harness.core.errors import DepthbenchError
from harness.core.files import (
    MAX_DEPTH,
    BadFile,
    copy_regular,
    is_regular,
    loads_json,
    loads_yaml,
    open_file,
    printable,
    read_json,
    read_text,
    walk_files,
)

pytestmark = pytest.mark.tier(
    "integration",
    tests=(  # the tests here that run a command (a fine-tune among them)
        "test_a_bad_meta_json_is_one_problem_of_its_run",
        "test_an_export_target_that_is_a_link_is_one_line",
        "test_a_finetune_into_a_work_dir_with_a_planted_checkpoint_link_is_one_line",
        "test_commands_that_read_records_fail_in_one_line",
    ),
)

ROOT = Path(__file__).resolve().parents[3]


def _one_line(out, code=2):
    assert out.returncode == code, (out.returncode, out.stdout[-1000:], out.stderr[-2000:])
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr[-2000:]
    return lines[0]


def _one_line_here(*args):
    """``_one_line`` of ``depthbench ARGS`` run in this process: the subject is the exit code and the one line, and a
    process of its own re-imports what the command needs (results, submit: ~2.5 s of CPU a call). A warning that a
    fresh interpreter would print (its default filters) counts as a line of stderr, as it would in a terminal."""
    with warnings.catch_warnings(record=True) as shown:
        warnings.resetwarnings()
        for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
            warnings.simplefilter("ignore", category)
        code, out, err = run_cli_here(*args)
    err += "".join(f"{w.category.__name__}: {w.message}\n" for w in shown)
    return _one_line(subprocess.CompletedProcess(args, code, out, err))


# ------------------------------------------------------------------------------------------------ the one opener
def test_the_opener_refuses_links_special_files_and_size(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    secret = tmp_path / "secret.json"
    secret.write_text('{"private": 1}')
    (run / "meta.json").symlink_to(secret)
    with pytest.raises(BadFile, match="meta.json .* is a symbolic link"):
        read_json(run / "meta.json", inside=run, what="meta.json")
    # a link higher up, inside the run directory: every component is opened without following
    (run / "sub").symlink_to(tmp_path)
    with pytest.raises(BadFile, match="is a symbolic link"):
        read_json(run / "sub" / "secret.json", inside=run)
    assert not is_regular(run / "sub" / "secret.json", inside=run)
    with pytest.raises(BadFile, match="is not inside"):
        read_json(run / ".." / "secret.json", inside=run)
    os.mkfifo(run / "fifo.json")
    with pytest.raises(BadFile, match="is a FIFO"):
        _in_time(lambda: read_json(run / "fifo.json", inside=run))
    with pytest.raises(BadFile, match="is a FIFO"):
        _in_time(lambda: open_file(run / "fifo.json"))  # without a root too
    with pytest.raises(BadFile, match="is a device"):
        _in_time(lambda: read_text("/dev/zero"))
    (run / "big.json").write_bytes(b" " * 2000)
    with pytest.raises(BadFile, match="2,000 bytes, more than the 1,000"):
        read_text(run / "big.json", max_bytes=1000)
    with pytest.raises(FileNotFoundError):
        read_json(run / "missing.json", inside=run)
    (run / "ok.json").write_text('{"a": [1, 2]}')
    assert read_json(run / "ok.json", inside=run) == {"a": [1, 2]}


@pytest.mark.parametrize(
    "text, message",
    [
        ("[" * 100000 + "]" * 100000, "nested more than"),
        ('{"a": ' * 5000 + "1" + "}" * 5000, "nested more than"),
        ('{"n": ' + "9" * 5000 + "}", "not valid JSON"),  # longer than Python's int digit limit
        ('{"n": NaN}', "not valid JSON"),
        ("[1, 2]", "holds a list where an object belongs"),
        ('"\\ud800', "not valid JSON"),
        (b'{"a": "\xff"}', "not valid JSON"),
    ],
)
def test_json_is_bounded_and_typed(text, message):
    with pytest.raises(BadFile, match=message):
        loads_json(text, source="x.json", finite=True)


def test_json_depth_skips_brackets_in_strings():
    assert loads_json('{"a": "' + "[" * 1000 + '"}') == {"a": "[" * 1000}
    assert loads_json("[" * MAX_DEPTH + "]" * MAX_DEPTH, expect=list)


@pytest.mark.parametrize(
    "text, message",
    [
        ("a:\n" + "".join(" " * (i + 1) + f"k{i}:\n" for i in range(200)), "nested more than"),
        ("[" * 5000 + "]" * 5000, "nested more than"),
        (
            "a: &a [x, x, x, x, x, x, x, x, x]\n"
            + "".join(f"{c}: &{c} [{', '.join(['*' + chr(ord(c) - 1)] * 9)}]\n" for c in "bcdefghijklmnopqrs"),
            "aliases",
        ),
        ("- 1\n- 2\n", "holds a list where an object belongs"),
        ("a: !!python/object/apply:os.system ['true']\n", "not valid YAML"),
        ("a: [unclosed\n", "not valid YAML"),
    ],
)
def test_yaml_is_bounded_and_typed(text, message):
    with pytest.raises(BadFile, match=message):
        loads_yaml(text, source="x.yaml")


# ------------------------------------------------------------------------------------------------ run directories
def test_a_run_directory_reads_no_link_and_waits_on_no_fifo(tmp_path):
    from harness.core.rundir import RunDir, read_config_json, read_metrics

    run = RunDir.create("exp", path=tmp_path / "run")
    run.finish("done")
    secret = tmp_path / "secret.jsonl"
    secret.write_text('{"private": 1}\n')
    (run.path / "metrics.jsonl").symlink_to(secret)
    with pytest.raises(BadFile, match="is a symbolic link"):
        read_metrics(run.path / "metrics.jsonl")
    (run.path / "config.json").unlink(missing_ok=True)
    os.mkfifo(run.path / "config.json")
    assert _in_time(lambda: read_config_json(run.path)) is None  # a FIFO config.json: "no config", at once
    (run.path / "meta.json").unlink()
    os.mkfifo(run.path / "meta.json")
    with pytest.raises(BadFile, match="meta.json .* is a FIFO"):
        _in_time(lambda: RunDir.open(run.path, writer=False))


def test_a_fifo_as_lock_file_is_one_line(tmp_path):
    from harness.core.rundir import lock_run_dir, run_dir_in_use

    (tmp_path / "run").mkdir()
    os.mkfifo(tmp_path / "run" / ".lock")
    assert _in_time(lambda: run_dir_in_use(tmp_path / "run")) is None
    with pytest.raises(DepthbenchError, match=r"\.lock is not a regular file"):
        _in_time(lambda: lock_run_dir(tmp_path / "run"))


def test_a_planted_tb_link_does_not_move_the_events(tmp_path):
    from harness.core.rundir import RunDir

    run = RunDir.create("exp", path=tmp_path / "run")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run.path / "tb").symlink_to(elsewhere)
    with pytest.raises(BadFile, match="tb .* is a symbolic link"):
        run.file("tb")
    with pytest.raises(BadFile, match="is a symbolic link"):
        run.file("tb/events.out")
    run.finish("done")
    assert not any(elsewhere.iterdir())


def test_resume_auto_never_follows_a_last_pth_link_to_another_run(tmp_path):
    import torch

    from harness.engine.checkpoint import find_resume, save_atomic

    other = tmp_path / "other"
    other.mkdir()
    save_atomic({"w": torch.ones(1)}, other / "last.pth")
    run = tmp_path / "run"
    run.mkdir()
    (run / "meta.json").write_text('{"status": "running"}')
    (run / "last.pth").symlink_to(other / "last.pth")
    with pytest.raises(BadFile, match="last.pth.* is a symbolic link"):
        find_resume("auto", run)
    (run / "last.pth").unlink()
    assert find_resume("auto", run) is None
    save_atomic({"w": torch.ones(1)}, run / "last.pth")
    assert find_resume("auto", run) == run / "last.pth"


def test_train_resume_auto_with_a_linked_last_pth_is_one_line(tmp_path, cli):
    other = tmp_path / "other"
    other.mkdir()
    (other / "last.pth").write_bytes(b"not a checkpoint")
    work = tmp_path / "run"
    work.mkdir()
    (work / "meta.json").write_text('{"status": "preempted"}')
    (work / "last.pth").symlink_to(other / "last.pth")
    out = cli("train", "configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py", "--work-dir", work, "--resume", "auto")
    assert "is a symbolic link" in _one_line(out)


# ------------------------------------------------------------------------------------------------ copies, walks
def test_copies_into_a_report_take_only_regular_files_inside_the_source(tmp_path):
    source = tmp_path / "claims"
    source.mkdir()
    (source / "figure.png").write_bytes(b"png")
    private = tmp_path / "private.png"
    private.write_bytes(b"secret")
    (source / "linked.png").symlink_to(private)
    site = tmp_path / "site"
    site.mkdir()
    copy_regular(source / "figure.png", site / "figure.png", inside=source)
    assert (site / "figure.png").read_bytes() == b"png"
    with pytest.raises(BadFile, match="is a symbolic link"):
        copy_regular(source / "linked.png", site / "linked.png", inside=source)
    with pytest.raises(BadFile, match="is not inside"):
        copy_regular(source / ".." / "private.png", site / "x.png", inside=source)
    assert not (site / "linked.png").exists() and not (site / "x.png").exists()


def test_a_data_root_is_walked_without_loops_or_leaving_it(tmp_path):
    root = tmp_path / "data"
    (root / "train" / "cat").mkdir(parents=True)
    (root / "train" / "cat" / "a.png").write_bytes(b"x")
    (root / "train" / "cat" / "loop").symlink_to(root / "train")  # a loop inside the root
    os.mkfifo(root / "train" / "cat" / "b.png")  # not a regular file: never opened
    files = _in_time(lambda: list(walk_files(root)))
    assert files == [root / "train" / "cat" / "a.png"]
    (root / "train" / "cat" / "out").symlink_to(tmp_path)
    with pytest.raises(BadFile, match="symbolic link out of the data root"):
        _in_time(lambda: list(walk_files(root)))


# ------------------------------------------------------------------------------------------------ printing
def test_printable_strips_terminal_escapes():
    assert printable("gpu\x1b]0;owned\x07\x1b[2J\r\nx\u202e") == "gpu?]0;owned??[2J??x?"
    assert printable("a\nb", newlines=True) == "a\nb"


# ------------------------------------------------------------------------------------------------ records, caches
def test_bad_numbers_in_a_preflight_record_never_reach_the_estimate(tmp_path, monkeypatch):
    from harness.core.config import load_config
    from harness.measure import estimate as est
    from harness.measure.preflight import read_records

    cfg = load_config("configs/stepsnet/resnet18_8xb128-300e_in1k.py", ["data.train_subset=2560"])
    ident = est.identity(cfg, 128)
    folder = tmp_path / "preflight"
    for name, fields in (
        ("nan", {"step_ms": float("nan")}),
        ("text", {"step_ms": "fast"}),
        ("zero", {"step_ms": 5.0, "micro_batch": 0}),
        ("inf", {"step_ms": 1e999}),
        ("kwargs", {"step_ms": 5.0, "model_kwargs": [1], "input_size": 7}),
    ):
        (folder / name).mkdir(parents=True)
        record = {
            "format": "depthbench-preflight/1",
            "time": f"2026-11-2{len(name)}",
            "device": "cuda",
            "device_name": "GPU\x1b]0;pwned\x07\x1b[2J",
            "configs": [{**ident, "world": 8, **fields}],
        }
        (folder / name / "preflight.json").write_text(json.dumps(record))
    os.mkfifo(folder / "fifo")  # neither a folder nor a record: skipped at once
    (folder / "deep").mkdir()
    (folder / "deep" / "preflight.json").write_text("[" * 50000 + "]" * 50000)
    records = _in_time(lambda: read_records(tmp_path))
    assert len(records) == 5 and all("\x1b" not in r["device_name"] for r in records)
    job = est.Job("ResNet-18", "configs/stepsnet/resnet18_8xb128-300e_in1k.py", ["data.train_subset=2560"])
    (row,) = est.estimate([job], est.Layout(nodes=1, gpus_per_node=8), records=records, bench_rows=[]).rows
    assert row.step_s is None and row.source.startswith("none: no preflight record")
    good = {**json.loads((folder / "nan" / "preflight.json").read_text()), "configs": [{**ident, "step_ms": 250.0}]}
    (folder / "nan" / "preflight.json").write_text(json.dumps(good))
    (row,) = est.estimate(
        [job], est.Layout(nodes=1, gpus_per_node=8), records=read_records(tmp_path), bench_rows=[]
    ).rows
    assert row.step_s == pytest.approx(0.25) and "\x1b" not in row.source and "GPU?]0;pwned??[2J" in row.source


def test_a_measurement_cache_that_is_a_fifo_or_a_link_is_rebuilt_at_once(tmp_path, monkeypatch):
    from harness.measure.cache import MeasurementCache

    monkeypatch.setenv("DEPTHBENCH_CACHE", str(tmp_path))
    os.mkfifo(tmp_path / "measurements.json")
    assert _in_time(lambda: MeasurementCache().values) == {}
    (tmp_path / "measurements.json").unlink()
    (tmp_path / "elsewhere.json").write_text('{"k": {"value": 1.0}}')
    (tmp_path / "measurements.json").symlink_to(tmp_path / "elsewhere.json")
    assert MeasurementCache().values == {}
    (tmp_path / "measurements.json").unlink()
    (tmp_path / "measurements.json").write_text(
        '{"a": {"value": NaN}, "b": {"value": "1"}, "c": [1], "d": {"value": 2.5}, "e": {"error": "x"}}'
    )
    assert MeasurementCache().values == {"d": {"value": 2.5}, "e": {"error": "x"}}


def test_job_records_that_are_fifos_or_escapes_are_named_and_stripped(tmp_path, monkeypatch):
    from slurm.jobs import read_records

    monkeypatch.setenv("DEPTHBENCH_RUNS", str(tmp_path))
    (tmp_path / "slurm").mkdir()
    os.mkfifo(tmp_path / "slurm" / "1.json")
    (tmp_path / "slurm" / "2.json").write_text(
        json.dumps(
            {
                "paper": "p\x1b[31m",
                "elements": [{"job": "2", "work_dir": str(tmp_path / "run"), "name": "job\x1b]0;owned\x07\r"}],
            }
        )
    )
    (tmp_path / "slurm" / "3.json").write_text('{"elements": ' + "[" * 20000 + "]" * 20000 + "}")
    problems = []
    records = _in_time(lambda: read_records(problems))
    assert [e["name"] for r in records for e in r["elements"]] == ["job?]0;owned??"]
    assert records[0]["paper"] == "p?[31m"
    assert any("1.json is a FIFO" in p for p in problems) and any("3.json is nested" in p for p in problems)


# ------------------------------------------------------------------------------------------------ claims, results
def test_a_claims_figure_that_links_out_or_climbs_is_left_out_of_the_site(tmp_path, capsys):
    from results.report import _copy_figure

    figures, site = tmp_path / "claims" / "figures", tmp_path / "site"
    figures.mkdir(parents=True)
    site.mkdir()
    (tmp_path / "private.png").write_bytes(b"secret")
    (figures / "deit-a.png").symlink_to(tmp_path / "private.png")
    (figures / "deit-b.png").write_bytes(b"png")
    assert not _copy_figure(figures, "deit-a.png", site)
    assert not _copy_figure(figures, "../../private.png", site)
    assert _copy_figure(figures, "deit-b.png", site) and (site / "deit-b.png").read_bytes() == b"png"
    assert sorted(p.name for p in site.iterdir()) == ["deit-b.png"]
    err = capsys.readouterr().err
    assert "deit-a.png is a symbolic link" in err and "not a plain file name" in err


@pytest.mark.parametrize("text", ["[" * 100000, "[1e999999999999]", '[{"claim": 1}]', "{}", "not json"])
def test_a_bad_claims_report_is_one_line(tmp_path, text):
    from results.claims import ClaimError, read_report

    (tmp_path / "claims.json").write_text(text)
    with pytest.raises(ClaimError) as error:
        read_report(tmp_path / "claims.json")
    assert "\n" not in str(error.value) and "claims.json" in str(error.value)


def test_a_claims_run_whose_meta_json_is_not_json_is_not_done(tmp_path):
    from results.claims import RunSpec, run_done

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "meta.json").write_text("{not json")
    spec = RunSpec("deit", "a", 0, "configs/x.py", [], tmp_path / "run")
    assert run_done(spec) is False
    (tmp_path / "run" / "meta.json").unlink()
    os.mkfifo(tmp_path / "run" / "meta.json")
    assert _in_time(lambda: run_done(spec)) is False


def test_results_name_a_fifo_or_a_link_in_a_run_and_wait_on_neither(tmp_path):
    from results import runs

    for name in ("fifo", "link"):
        (tmp_path / "exp" / name).mkdir(parents=True)
    os.mkfifo(tmp_path / "exp" / "fifo" / "meta.json")
    os.mkfifo(tmp_path / "exp" / "fifo" / "metrics.jsonl")
    (tmp_path / "secret.json").write_text('{"status": "done", "model": "private"}')
    (tmp_path / "exp" / "link" / "meta.json").symlink_to(tmp_path / "secret.json")
    frame, problems = _in_time(lambda: runs.collect([tmp_path]))
    assert len(frame) == 2 and set(frame["status"]) == {"unknown"} and "private" not in set(frame["model"])
    text = problems.summary()
    assert "a FIFO" in text and "a symbolic link" in text


# ------------------------------------------------------------------------------------------------ MMEngine work dirs
def test_the_work_dir_guard_refuses_planted_links_and_removes_them_mid_run(tmp_path, capsys):
    from downstream.hooks import guard_work_dir

    work, other = tmp_path / "work", tmp_path / "other"
    (work / "20261127_000000" / "vis_data").mkdir(parents=True)
    other.mkdir()
    (other / "precious.pth").write_bytes(b"precious")
    (work / "iter_1.pth").write_bytes(b"ours")
    (work / "last.pth").symlink_to("iter_1.pth")  # depthbench's own link, beside it: allowed
    guard_work_dir(work)
    for planted in ("iter_2.pth", "last_checkpoint", "20261127_000000/vis_data/scalars.json"):
        (work / planted).symlink_to(other / "precious.pth")
        with pytest.raises(BadFile, match=f"{planted} in the work dir is a symbolic link"):
            guard_work_dir(work)
        guard_work_dir(work, remove=True)  # mid-run: the link goes, its target stays
        assert not os.path.lexists(work / planted) and (other / "precious.pth").read_bytes() == b"precious"
    (work / "epoch_1.pth").unlink(missing_ok=True)
    (work / "20261127_000000" / "vis_data").rmdir()
    (work / "20261127_000000" / "vis_data").symlink_to(other)
    with pytest.raises(BadFile, match="vis_data in the work dir is a symbolic link"):
        guard_work_dir(work)
    (work / "20261127_000000" / "vis_data").unlink()
    os.mkfifo(work / "epoch_1.pth")
    with pytest.raises(BadFile, match="epoch_1.pth in the work dir is not a regular file"):
        guard_work_dir(work)
    assert "removed" in capsys.readouterr().err


def test_a_finetune_into_a_work_dir_with_a_planted_checkpoint_link_is_one_line(embedded_cache, tmp_path, capsys):
    from harness import cli

    det = str(ROOT / "configs/det/mask-rcnn_steps-resnet18-w32_fpn_500it_embedded-coco.py")
    work, target = tmp_path / "work", tmp_path / "precious.pth"
    work.mkdir()
    target.write_bytes(b"precious")
    (work / "iter_2.pth").symlink_to(target)  # MMEngine's CheckpointHook would torch.save through it
    code = cli.main(
        [
            "finetune",
            det,
            "--work-dir",
            str(work),
            "train_cfg.max_iters=2",
            "default_hooks.logger.interval=1",
            "+val_dataloader.dataset.indices=4",
        ]
    )
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1 and "iter_2.pth in the work dir is a symbolic link" in err[0], err
    assert target.read_bytes() == b"precious"


def test_an_export_target_that_is_a_link_is_one_line(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "meta.json").write_text('{"status": "done"}')
    (run / "best.pth").write_bytes(b"x")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "out").symlink_to(tmp_path / "elsewhere")
    assert "--out" in _one_line_here("export", run, "--out", tmp_path / "out") and (tmp_path / "elsewhere").is_dir()
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    assert "is a symbolic link" in _one_line_here("export", run, "--out", tmp_path / "dangling")
    (run / "best.pth").unlink()
    (run / "best.pth").symlink_to(tmp_path / "other.pth")
    assert "best.pth is a symbolic link" in _one_line_here("export", run, "--out", tmp_path / "new")


# ------------------------------------------------------------------------------------------------ images
def _image_folder(root: Path) -> Path:
    from PIL import Image

    for cls in ("a", "b"):
        (root / "train" / cls).mkdir(parents=True)
        for i in range(3):
            Image.new("RGB", (8, 8), (40 * i, 0, 0)).save(root / "train" / cls / f"{i}.png")
    return root


def _truncated_jpeg(path: Path):
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (64, 64), (1, 2, 3)).save(buffer, "JPEG")
    path.write_bytes(buffer.getvalue()[:200])


def _bomb_png(path: Path):
    import struct
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    side = 20000  # 400 Mpx > 2 x Image.MAX_IMAGE_PIXELS (89.5 Mpx): DecompressionBombError; a few hundred bytes
    rows = zlib.compress(b"\0" * (side + 1) * 64)  # only the first rows: the header alone trips the check
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0))
        + chunk(b"IDAT", rows)
        + chunk(b"IEND", b"")
    )


@pytest.mark.parametrize("kind", ["truncated", "not-an-image", "bomb"])
def test_an_image_that_does_not_decode_is_one_line_naming_it(tmp_path, kind):
    from harness.core.errors import DataError
    from harness.tasks.image import ImageFolder

    root = _image_folder(tmp_path)
    bad = root / "train" / "b" / "bad.jpg"
    {
        "truncated": _truncated_jpeg,
        "bomb": lambda p: _bomb_png(p.with_suffix(".png")),
        "not-an-image": lambda p: p.write_text("<html>not found</html>"),
    }[kind](bad)
    bad = bad.with_suffix(".png") if kind == "bomb" else bad
    dataset = ImageFolder(root / "train")
    index = next(i for i, (path, _) in enumerate(dataset.samples) if path == str(bad))
    with pytest.raises(DataError) as error:
        dataset[index]
    assert str(error.value).startswith(f"{bad}: the image does not decode") and "\n" not in str(error.value)
    skipping = ImageFolder(root / "train", skip_bad=True)
    image, target = skipping[index]
    assert image.size == (8, 8) and skipping.skipped == 1


def test_a_loader_worker_s_decode_error_is_one_line_naming_the_file(tmp_path):
    from torch.utils.data import DataLoader

    from harness.core.errors import DataError
    from harness.tasks.image import ImageFolder

    root = _image_folder(tmp_path)
    (root / "train" / "a" / "0.png").write_bytes(b"\x89PNG broken")
    loader = DataLoader(ImageFolder(root / "train", transform=lambda image: 0), batch_size=6, num_workers=1)
    with pytest.raises(DataError) as error:
        next(iter(loader))
    assert str(error.value).startswith(f"{root / 'train' / 'a' / '0.png'}: the image does not decode")
    assert "Traceback" not in str(error.value)


def test_an_image_folder_with_a_link_loop_is_read_once(tmp_path):
    from harness.tasks.image import ImageFolder

    root = _image_folder(tmp_path)
    (root / "train" / "a" / "again").symlink_to(root / "train")
    dataset = _in_time(lambda: ImageFolder(root / "train"))
    assert len(dataset) == 6 and sorted(dataset.class_to_idx) == ["a", "b"]


@pytest.mark.parametrize("data", [None, "shape", "labels"])
def test_a_wrongly_shaped_cifar_batch_is_one_line(tmp_path, data):
    import pickle

    import numpy as np

    from harness.core.errors import DataError
    from harness.tasks.image import CIFAR10_FILES, CIFAR10Pickle

    good = {"data": np.zeros((2, 3072), dtype=np.uint8), "labels": [0, 1]}
    bad = {
        None: {"data": np.zeros((2, 100), dtype=np.uint8), "labels": [0, 1]},
        "shape": {"data": [[1, 2], [3]], "labels": [0, 1]},
        "labels": {"data": np.zeros((2, 3072), dtype=np.uint8), "labels": [0]},
    }[data]
    for name in CIFAR10_FILES:
        (tmp_path / name).write_bytes(pickle.dumps(bad if name == "data_batch_2" else good))
    with pytest.raises(DataError, match="data_batch_2 is not a CIFAR batch file"):
        CIFAR10Pickle(tmp_path, train=True)


# ------------------------------------------------------------------------------------------------ control characters
def test_jobs_prints_no_terminal_escape_from_a_record(tmp_path, cli):
    (tmp_path / "slurm").mkdir()
    run = tmp_path / "exp" / "run\x1b[2J"
    run.mkdir(parents=True)
    (run / "meta.json").write_text(json.dumps({"status": "running\x1b]0;x\x07", "experiment": "exp"}))
    (tmp_path / "slurm" / "7.json").write_text(
        json.dumps(
            {"paper": "deit", "elements": [{"job": "7", "work_dir": str(run), "name": "name\x1b]0;owned\x07\x1b[31m"}]}
        )
    )
    os.mkfifo(tmp_path / "slurm" / "8.json")
    out = cli("jobs", env={"DEPTHBENCH_RUNS": str(tmp_path), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout + out.stderr and "\x07" not in out.stdout
    assert "name?]0;owned??[31m" in out.stdout and "run?[2J" in out.stdout
    assert "8.json is a FIFO" in out.stderr


def test_results_print_no_terminal_escape_from_a_run(tmp_path, cli):
    run = tmp_path / "exp\x1b[2J" / "r1"
    run.mkdir(parents=True)
    (run / "meta.json").write_text(json.dumps({"status": "done\x1b[31m", "experiment": "exp\x1b]0;t\x07"}))
    (run / "metrics.jsonl").write_text("[" * 100000 + "\n")
    out = cli("results", "--runs", tmp_path, "--no-audit", "--format", "md")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "\x1b" not in out.stdout + out.stderr and "\x07" not in out.stdout + out.stderr


# ------------------------------------------------------------------------------------------------ fuzz
def _documents(seed: int = 0, n: int = 60) -> list[str]:
    """Adversarial documents (deep, huge, wrong types, NaN/inf, not text) and random JSON values of random types
    and shapes, as text: every one is a valid or an invalid record for every reader."""
    import random

    rng = random.Random(seed)
    fixed = [
        "",
        " ",
        "null",
        "0",
        "-1",
        "1e999",
        "-Infinity",
        "NaN",
        '"text"',
        "[]",
        "{}",
        "[1, 2]",
        "true",
        "[" * 200000,
        "[" * 100000 + "]" * 100000,
        '{"a":' * 3000 + "1" + "}" * 3000,
        "9" * 100000,
        '{"status": ' + "9" * 5000 + "}",
        '{"status": NaN, "format": Infinity}',
        "\x00\x01\x02\xff",
        '{"configs": [{"step_ms": "x", "micro_batch": 0}], "format": "depthbench-preflight/1"}',
        '{"elements": [{"job": [], "work_dir": {}}], "paper": 5}',
        '{"model": {"name": ' + "[" * 5000 + "}}",
        '[{"claim": {"source": {"rows": 3}}}]',
        "\ufeff{}",
        '{"a": "\\ud800"}',
        "- " * 10000,
        "a: &a [1]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n" * 1,
        "!!python/object/apply:os.system [x]",
        "{" * 5000,
        '{"tables": [{"id": 1, "rows": [[[[1]]]]}]}',
        '{"arms": {"a": []}, "claims": [1]}',
    ]

    def value(depth=0):
        kinds = ["int", "float", "str", "bool", "none", "big", "nan"] + (["list", "dict"] * 3 if depth < 6 else [])
        kind = rng.choice(kinds)
        if kind == "list":
            return [value(depth + 1) for _ in range(rng.randint(0, 4))]
        if kind == "dict":
            keys = [
                "status",
                "format",
                "configs",
                "elements",
                "model",
                "name",
                "step_ms",
                "micro_batch",
                "job",
                "work_dir",
                "tables",
                "rows",
                "arms",
                "claims",
                "paper",
                "value",
                "error",
                "splits",
                "x",
            ]
            return {rng.choice(keys): value(depth + 1) for _ in range(rng.randint(0, 5))}
        return {
            "int": lambda: rng.randint(-10, 10**6),
            "float": lambda: rng.uniform(-1e6, 1e6),
            "str": lambda: "".join(rng.choice("ab\x1b[]{}\"\\\n/.") for _ in range(rng.randint(0, 12))),
            "bool": lambda: rng.random() < 0.5,
            "none": lambda: None,
            "big": lambda: 10 ** rng.randint(20, 400),
            "nan": lambda: rng.choice([float("nan"), float("inf"), -float("inf")]),
        }[kind]()

    return fixed + [json.dumps(value()) for _ in range(n)]


def _readers(root: Path):
    """Every reader of JSON/YAML records, as ``(file it reads, call)``; each call reads what the file holds."""
    from harness.core.rundir import RunDir, read_config_json, read_metrics
    from harness.engine.checkpoint import latest_run
    from harness.measure import preflight
    from harness.measure.cache import MeasurementCache
    from harness.tasks.shards import ShardDataset, pack
    from results import claims, paper_tables, runs
    from slurm import jobs

    run = root / "exp" / "run"
    pack(_image_folder(root / "images"), root / "shards", splits=("train",))  # _info.json is a record of its own
    return [
        (run / "meta.json", lambda: RunDir.open(run, writer=False).meta()),
        (run / "config.json", lambda: read_config_json(run)),
        (run / "metrics.jsonl", lambda: read_metrics(run / "metrics.jsonl")),
        (run / "meta.json", lambda: latest_run(root / "exp")),
        (run / "meta.json", lambda: runs.collect([root / "exp"])),
        (run / "metrics.jsonl", lambda: runs.collect([root / "exp"])),
        (root / "preflight" / "x" / "preflight.json", lambda: preflight.read_records(root)),
        (root / "slurm" / "1.json", lambda: jobs.read_records([])),
        (root / "cache" / "measurements.json", lambda: MeasurementCache().values),
        (root / "claims.json", lambda: claims.read_report(root / "claims.json")),
        (root / "tables.yaml", lambda: paper_tables.load(root / "tables.yaml")),
        (root / "claims.yaml", lambda: claims.load(root / "claims.yaml", tables={})),
        (root / "shards" / "_info.json", lambda: ShardDataset(root / "shards", "train")),
    ]


def test_every_record_reader_survives_random_and_adversarial_documents(tmp_path, monkeypatch):
    """Each reader returns, or raises a one-line DepthbenchError; never another exception, never a hang."""
    monkeypatch.setenv("DEPTHBENCH_RUNS", str(tmp_path))
    monkeypatch.setenv("DEPTHBENCH_CACHE", str(tmp_path / "cache"))
    (tmp_path / "exp" / "run").mkdir(parents=True)
    (tmp_path / "exp" / "run" / "meta.json").write_text('{"status": "running"}')
    for folder in ("preflight/x", "slurm", "cache"):
        (tmp_path / folder).mkdir(parents=True)
    failures = []
    for path, read in _readers(tmp_path):
        before = path.read_bytes() if path.exists() else None
        for document in _documents(int(os.environ.get("DEPTHBENCH_FUZZ_SEED", "0"))):
            path.write_text(document, errors="surrogateescape")
            try:
                _in_time(read, 30)
            except DepthbenchError as e:
                if "\n" in str(e) or not str(e):
                    failures.append((path.name, document[:40], f"not one line: {str(e)[:80]}"))
            except Exception as e:  # noqa: BLE001 - what the test looks for
                failures.append((path.name, document[:40], f"{type(e).__name__}: {str(e)[:80]}"))
        if before is None:
            path.unlink()
        else:
            path.write_bytes(before)
    assert not failures, "\n".join(map(str, failures[:20])) + f"\n({len(failures)} in all)"


HOSTILE = ["[" * 100000, '{"a": ' + "9" * 5000 + "}", "NaN", "[1]", "\xff\xfe"]


@pytest.mark.parametrize("document", HOSTILE)
def test_commands_that_read_records_fail_in_one_line(tmp_path, document):
    """The commands whose input is one record exit 2 with one line naming it on every bad document: export (a run's
    config.json), results --claims (a claims report), results --file (a tables file; submit --table takes a paper's
    own tables by name, PAPER:TABLE, never a file). Every other input is valid, so the line is that record's reader:
    a line that names another file (or none) fails."""

    def hostile(path):
        path.write_text(document, errors="surrogateescape")
        return str(path)

    run = tmp_path / "run"
    run.mkdir()
    (run / "meta.json").write_text('{"status": "done"}')
    (run / "best.pth").write_bytes(b"x")
    assert f"{run} has no config.json" in _one_line_here("export", run, "--out", tmp_path / "out")
    config = hostile(run / "config.json")  # there, but bad: named as such, never "has no config.json"
    assert config in _one_line_here("export", run, "--out", tmp_path / "out")
    (tmp_path / "claims").mkdir()
    report = hostile(tmp_path / "claims" / "claims.json")
    assert report in _one_line_here(
        "results", "--claims", tmp_path / "claims", "--format", "html", "--out", tmp_path / "site", "--no-audit"
    )
    tables = hostile(tmp_path / "t.yaml")
    assert tables in _one_line_here("results", "--file", tables, "--no-audit")


@pytest.mark.parametrize("document", HOSTILE)
def test_a_bad_meta_json_is_one_problem_of_its_run(tmp_path, document):
    """A run's meta.json is no command's one input: export only checks that a run has one, and the commands that
    read it across runs (results, jobs, demo) list a bad one as that run's problem and go on."""
    run = tmp_path / "runs" / "exp" / "r1"
    run.mkdir(parents=True)
    (run / "meta.json").write_text(document, errors="surrogateescape")
    code, _, err = run_cli_here(
        "results", "--runs", tmp_path / "runs", "--paper", "horesnet", "--table", "1", "--no-audit"
    )
    assert code == 0 and f"{run}: meta.json unreadable (" in err and "Traceback" not in err, err


def test_a_deeply_nested_or_fifo_alpaca_file_is_one_line(tmp_path):
    from harness.core.errors import DataError
    from harness.tasks.alpaca import _read

    (tmp_path / "deep.json").write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(DataError, match="deep.json is nested more than"):
        _read(str(tmp_path / "deep.json"), "k")
    os.mkfifo(tmp_path / "fifo.json")
    with pytest.raises(DataError, match="fifo.json is a FIFO"):
        _in_time(lambda: _read(str(tmp_path / "fifo.json"), "k"))
