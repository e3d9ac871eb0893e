"""harness.core.files, the one way depthbench opens a file a user hands it (issue 39, the file-access half): never
through a link, never a FIFO or device (and never blocking on one), never a huge or deeply nested file, every refusal
one line naming the file; data roots walked without leaving the root or looping; record strings printed without
control characters. And every reader of a record survives random and adversarial documents.

Each test builds the crafted input that got through before issue 39 (checked against the code before it). Every
call that could hang on a FIFO runs under a timeout (``_in_time``), so a regression fails instead of blocking.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from fixtures.files import in_time as _in_time
from fixtures.files import read_only
from fixtures.images import image_folder as _image_folder
from fixtures.images import packed_shards as _pack
from harness.core.errors import DepthbenchError
from harness.core.files import (
    MAX_DEPTH,
    BadFile,
    check_writable_file,
    copy_regular,
    is_regular,
    loads_json,
    loads_yaml,
    open_file,
    printable,
    read_json,
    read_text,
    unwritable_file,
    unwritable_folder,
    walk_files,
)


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


def test_writability_is_tried_not_asked(tmp_path):
    """The one writability check: a file really created in the nearest existing folder, an existing file opened
    for appending -- not os.access, which says yes to root on a virtual file system (/proc here) and on a
    read-only one."""
    assert unwritable_folder("/proc/depthbench/run").startswith("cannot write in /proc (")
    assert unwritable_file("/proc/depthbench.csv").startswith("cannot write in /proc (")
    folder, afile = tmp_path / "ro", tmp_path / "afile"
    folder.mkdir()
    afile.write_text("kept\n")
    with read_only(folder):
        problem = unwritable_folder(folder / "new" / "run")
        assert problem.startswith(f"cannot write in {folder} (") and problem.endswith(f"{folder} is not writable)")
        assert unwritable_file(folder / "x.csv").startswith(f"cannot write in {folder} (")
    with read_only(afile):
        assert unwritable_folder(tmp_path) is None
        assert unwritable_file(afile).startswith(f"cannot write {afile} (")
    assert afile.read_text() == "kept\n" and list(folder.iterdir()) == []  # nothing truncated, no probe left
    assert unwritable_folder(afile / "run") == f"{afile} is a file, not a directory"
    assert unwritable_file(afile / "x.csv") == f"{afile} is a file, not a directory"
    assert unwritable_file(folder) == f"{folder} is a directory"
    assert unwritable_file(tmp_path / "new" / "x.csv") is None and not (tmp_path / "new").exists()
    with pytest.raises(DepthbenchError, match=r"^--out \S+afile/x.csv: \S+afile is a file, not a directory; give"):
        check_writable_file(afile / "x.csv", "--out", "the CSV")


def test_a_data_root_is_walked_without_loops_or_leaving_it(tmp_path):
    root = tmp_path / "data"
    (root / "train" / "cat").mkdir(parents=True)
    (root / "train" / "cat" / "a.png").write_bytes(b"x")
    (root / "train" / "cat" / "loop").symlink_to(root / "train")  # a loop inside the root
    files = _in_time(lambda: list(walk_files(root)))
    assert files == [root / "train" / "cat" / "a.png"]
    (root / "train" / "cat" / "out").symlink_to(tmp_path)
    with pytest.raises(BadFile, match="symbolic link out of the data root"):
        _in_time(lambda: list(walk_files(root)))


def test_a_special_file_in_a_data_root_is_refused_not_skipped(tmp_path):
    """A FIFO (it would block its reader), a socket, a device or a link to nothing, whatever its name: one line
    naming it and what to do, not a file silently left out of the data set."""
    import socket

    root = tmp_path / "data"
    (root / "train" / "cat").mkdir(parents=True)
    (root / "train" / "cat" / "a.png").write_bytes(b"x")
    special = root / "train" / "cat" / "b"
    for make, kind in (
        (os.mkfifo, "a FIFO"),
        (lambda p: socket.socket(socket.AF_UNIX).bind(str(p)), "a socket"),
        (lambda p: p.symlink_to(root / "gone.png"), f"a symbolic link to nothing ({root / 'gone.png'})"),
        (lambda p: p.symlink_to("/dev/null"), "a symbolic link out of the data root"),
    ):
        make(special)
        with pytest.raises(BadFile) as error:
            _in_time(lambda: list(walk_files(root, suffixes=(".png",))))
        message = str(error.value)
        assert message.startswith(f"{special} ") and kind in message and "\n" not in message, message
        assert message.endswith(("remove it", "copy the file into it")), message
        special.unlink()
    assert list(walk_files(root)) == [root / "train" / "cat" / "a.png"]


# ------------------------------------------------------------------------------------------------ printing
def test_printable_strips_terminal_escapes():
    assert printable("gpu\x1b]0;owned\x07\x1b[2J\r\nx\u202e") == "gpu?]0;owned??[2J??x?"
    assert printable("a\nb", newlines=True) == "a\nb"


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


def _random_array(rng):
    kinds = [np.int8, np.int64, np.uint64, np.float64, "U3", "S3", bool, object]
    shape = tuple(int(n) for n in rng.integers(0, 6, rng.integers(0, 3)))
    kind = kinds[rng.integers(len(kinds))]
    values = (
        rng.integers(-(1 << 62), 1 << 62, shape, dtype=np.int64) if rng.random() < 0.5 else rng.integers(-3, 5, shape)
    )
    return values.astype(kind) if kind is not object else np.asarray(values.tolist(), object)


def _binary_documents(rng, good: bytes, save) -> list[bytes]:
    """Random bytes, truncations of a good file, and ``save(buffer)`` of random arrays, 40 times."""
    import io

    documents = [b"", b"PK", b"\x93NUMPY", good[: len(good) // 2], good[:-30], rng.bytes(4000)]
    for _ in range(40):
        buffer = io.BytesIO()
        save(buffer)
        documents.append(buffer.getvalue())
    return documents


def _survives(path: Path, documents: list[bytes], read) -> list[str]:
    failures = []
    for document in documents:
        path.write_bytes(document)
        try:
            _in_time(read)
        except DepthbenchError as e:
            if "\n" in str(e):
                failures.append(f"not one line: {e}")
        except Exception as e:  # noqa: BLE001 - what the test looks for
            failures.append(f"{type(e).__name__}: {str(e)[:100]}")
    return failures


def test_the_binary_readers_survive_random_and_adversarial_files(tmp_path):
    """The shard index (.npz) and every .npy (the LM token cache's reader, read_npy) are binary: a fuzz of their
    own (random bytes, truncations, random arrays of random types and shapes); ``_info.json`` is in the record fuzz
    (above). Each read returns or raises one DepthbenchError line."""
    from harness.core.files import read_npy
    from harness.tasks.shards import ShardDataset, index_name

    rng = np.random.default_rng(int(os.environ.get("DEPTHBENCH_FUZZ_SEED", "0")))
    shards = _pack(tmp_path)
    index = shards / index_name("train")
    keys = ("shard", "offset", "size", "label", "path", "shards")
    failures = _survives(
        index,
        _binary_documents(
            rng,
            index.read_bytes(),
            lambda fh: np.savez(fh, **{key: _random_array(rng) for key in keys if rng.random() > 0.1}),
        ),
        lambda: ShardDataset(shards, "train"),
    )
    cache = tmp_path / "train.txt.ids.npy"
    with open(cache, "wb") as fh:
        np.save(fh, np.arange(10, dtype=np.int32))
    failures += _survives(
        cache,
        _binary_documents(rng, cache.read_bytes(), lambda fh: np.save(fh, _random_array(rng), allow_pickle=True)),
        lambda: read_npy(cache, what="token cache"),
    )
    assert not failures, "\n".join(failures[:10])
