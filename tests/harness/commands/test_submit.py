"""``depthbench submit`` end to end: what it puts in a Slurm script is data, never shell (issue 25), and
``submit --dry-run`` works on a login node without the data (issue 26). No cluster: rendered scripts are read
the way sbatch reads them and run under stub ``srun``/``scontrol``/``sbatch`` on ``PATH``; an injected command
would create a marker file.
"""

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from clitools import run_cli_here as cli


ROOT = Path(__file__).resolve().parents[3]
PRESET = "configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py"
IN1K = "configs/stepsnet/resnet18_8xb128-300e_in1k.py"
DET = "configs/det/mask-rcnn_steps-resnet18-w32_fpn_500it_embedded-coco.py"
TINY = ["model.width=8", "data.input_size=8", "data.train_subset=160", "data.val_subset=40", "batch_size=8", "epochs=2"]
STUBS = {
    # sbatch --parsable: keep the script it was given on stdin, answer a job id
    "sbatch": 'cat > "$STUB_DIR/submitted.sbatch"; echo 4242\n',
    # srun: record its words, then run the per-task command (`bash -c BODY rank CMD...`) with `true` as CMD:
    # the task's own shell runs, the training does not
    "srun": (
        'printf \'%s\\0\' "$@" > "$STUB_DIR/srun.args"\n'
        'while [ "$#" -gt 0 ] && [ "$1" != "-c" ]; do shift; done\n'
        'exec bash -c "$2" rank true\n'
    ),
    "scontrol": (
        'case "$1 $2" in\n'
        '  "show hostnames") echo n1 ;;\n'
        '  "show node") echo "NodeName=n1 NodeAddr=127.0.0.1 State=IDLE" ;;\n'
        '  *) echo "scontrol $*" >> "$STUB_DIR/scontrol.log" ;;\n'
        'esac\n'
    ),
}


@pytest.fixture
def stubs(tmp_path):
    folder = tmp_path / "stub-bin"
    folder.mkdir()
    for name, body in STUBS.items():
        (folder / name).write_text("#!/bin/bash\n" + body)
        (folder / name).chmod(0o755)
    return folder


@pytest.fixture
def marker(tmp_path):
    path = tmp_path / "INJECTED"
    yield path
    assert not path.exists(), "a value from the command line ran as a shell command"


def sbatch_words(line: str) -> list[str]:
    """The words sbatch takes from one ``#SBATCH`` line (slurm/src/sbatch/opt.c ``_get_argument``): whitespace
    separates, ' and " group, a backslash escapes, an unquoted # starts a comment."""
    words, i = [], 0
    while i < len(line):
        while i < len(line) and line[i].isspace():
            i += 1
        if i >= len(line):
            break
        word, quote, escape = "", None, False
        while i < len(line) and (quote or not line[i].isspace()):
            ch = line[i]
            i += 1
            if escape:
                word, escape = word + ch, False
            elif ch == "\\":
                escape = True
            elif quote:
                if ch == quote:
                    quote = None
                else:
                    word += ch
            elif ch in "\"'":
                quote = ch
            elif ch == "#":
                return words + ([word] if word else [])
            else:
                word += ch
        words.append(word)
    return words


def sbatch_view(script: str) -> list[list[str]]:
    """The options sbatch reads from a script: the words of each ``#SBATCH`` line until the first line that is
    neither blank nor a comment (sbatch splits the script on newlines only)."""
    options = []
    for line in script.split("\n")[1:]:
        if line.startswith("#SBATCH"):
            options.append(sbatch_words(line[len("#SBATCH") :]))
        elif line.strip() and not line.lstrip().startswith("#"):
            break
    return options


def check_script(script: str, stubs: Path, tmp_path: Path) -> list[str]:
    """The script as sbatch and bash see it: every #SBATCH line one option, the checkpoint/requeue/log options all
    read; then run as one task of job 4242 under the stubs. Returns the words srun was given."""
    options = sbatch_view(script)
    assert all(len(words) == 1 and words[0].startswith("--") for words in options), options
    keys = {words[0].split("=")[0] for words in options}
    assert {"--signal", "--requeue", "--open-mode", "--output", "--job-name", "--nodes"} <= keys, keys
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    path = tmp_path / "job.sbatch"
    path.write_text(script)
    env = {
        "PATH": f"{stubs}:{os.environ['PATH']}",
        "STUB_DIR": str(stubs),
        "HOME": str(tmp_path),
        "SLURM_JOB_ID": "4242",
        "SLURM_JOB_NODELIST": "n1",
        "SLURM_NTASKS": "1",
        "SLURM_PROCID": "0",
        "SLURM_LOCALID": "0",
    }
    out = subprocess.run(["bash", str(path)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    return (stubs / "srun.args").read_text().split("\0")[:-1]


def payloads(marker: Path) -> list[str]:
    command = f"touch {marker}"
    return [
        f"x\n{command}",
        f"x\r\n{command}",
        f"x\u2028{command}",
        f"x\t{command}",
        f"x;{command}",
        f"$({command})",
        f"`{command}`",
        f"x --wrap={command}",
        f"x#{command}",
        f'x"{command}"',
        f"x'{command}'",
        f"x\\\n{command}",
    ]


@pytest.mark.tier("integration")
@pytest.mark.parametrize(
    "option", ["--partition", "--account", "--qos", "--constraint", "--job-name", "--mem", "--time", "--sbatch"]
)
def test_no_option_value_reaches_the_shell(option, runs, stubs, marker, tmp_path):
    """Every hostile value of every option is refused in one line before anything is loaded (newlines and
    control characters always), or rendered so that sbatch reads one option per line and nothing runs."""
    for payload in payloads(marker):
        value = f"--reservation={payload}" if option == "--sbatch" else payload
        code, out, err = cli("submit", PRESET, *TINY, f"{option}={value}", "--dry-run")
        if not payload.isprintable():
            assert code == 2 and out == "" and err.count("\n") == 1, (option, payload, err)
            assert "newline or another control character" in err, err
        if code == 2:
            assert out == "" and err.count("\n") == 1 and err.startswith("depthbench submit: error: "), err
            continue
        assert code == 0, err
        check_script(out, stubs, tmp_path)


def test_engine_from_the_api_is_checked(runs):
    from harness.commands.submit import run_submit
    from harness.core.errors import DepthbenchError

    with pytest.raises(DepthbenchError, match="choose accelerate or deepspeed"):
        run_submit([PRESET], overrides=TINY, engine="accelerate; touch x", dry_run=True)


@pytest.mark.tier("integration")
def test_overrides_are_one_word_each(runs, stubs, marker, tmp_path):
    """Overrides travel quoted, one word each, whatever they hold; control characters are refused."""
    code, _, err = cli("submit", PRESET, *TINY, f"seed=1\ntouch {marker}", "--dry-run")
    assert code == 2 and err.count("\n") == 1 and "control character" in err, err
    hostile = f"experiment='a$(touch {marker})`touch {marker}`;b'"
    code, out, err = cli("submit", PRESET, *TINY, hostile, "--dry-run")
    if code == 0:  # else refused as a name that cannot be a run directory: also fine
        assert hostile in check_script(out, stubs, tmp_path)
    else:
        assert code == 2 and err.count("\n") == 1, err


@pytest.mark.tier("integration")
def test_config_path_with_a_newline(runs, stubs, marker, tmp_path):
    """A config file whose name holds a newline: the script's title comment stays one line, the path is one word.
    (A short folder, so that the path is in the title: longer ones are left out of it; the script runs in
    tmp_path, where an injected `touch INJECTED` would create the marker.)"""
    short = Path(tempfile.mkdtemp(prefix="db-", dir="/tmp"))
    try:
        config = short / f"e\ntouch {marker.name}\n.py"
        config.write_text(f"_base_ = [{str(ROOT / PRESET)!r}]\nexperiment = 'evil'\n")
        code, out, err = cli("submit", config, *TINY, "--dry-run")
        assert code == 0, err
        title, next_line = out.split("\n")[1:3]
        assert title.startswith("# depthbench: ") and "?touch" in title and next_line.startswith("# Rendered"), title
        words = check_script(out, stubs, tmp_path)
        assert str(config) in words
    finally:
        shutil.rmtree(short)
    assert not (ROOT / marker.name).exists()


@pytest.mark.tier("integration")
def test_runs_folder_with_a_blank_or_a_newline(runs, stubs, marker, tmp_path, monkeypatch):
    """The runs folder (DEPTHBENCH_RUNS) reaches the #SBATCH --output line: one quoted word, or refused."""
    spaced = tmp_path / "shared runs"
    monkeypatch.setenv("DEPTHBENCH_RUNS", str(spaced))
    code, out, err = cli("submit", PRESET, *TINY, "--dry-run")
    assert code == 0, err
    check_script(out, stubs, tmp_path)
    output = next(w[0] for w in sbatch_view(out) if w[0].startswith("--output="))
    assert output == f"--output={spaced}/slurm/%x-%j.out", output
    monkeypatch.setenv("DEPTHBENCH_RUNS", f"{tmp_path}/x\ntouch {marker}")
    code, out, err = cli("submit", PRESET, *TINY, "--dry-run")
    assert code == 2 and out == "" and err.count("\n") == 1 and "DEPTHBENCH_RUNS" in err, err


@pytest.mark.tier("integration")
def test_submitted_script_under_stub_sbatch(runs, stubs, marker, tmp_path, monkeypatch):
    """The real path: the script sbatch received (and the copy kept beside the record) runs the run's command with
    its overrides as they were given, and nothing else."""
    monkeypatch.setenv("PATH", f"{stubs}:{os.environ['PATH']}")
    monkeypatch.setenv("STUB_DIR", str(stubs))
    code, out, err = cli(
        "submit",
        PRESET,
        *TINY,
        "--sbatch=--comment=x,y",
        "--partition",
        "debug,gpu",
        "--constraint",
        "[a100|h100]&ib",
        "--account",
        "proj-1",
        "--qos",
        "normal",
    )
    assert code == 0, err
    assert "submitted job 4242" in out
    script = (stubs / "submitted.sbatch").read_text()
    assert (runs / "slurm" / "4242.sbatch").read_text() == script
    words = check_script(script, stubs, tmp_path)
    assert words[words.index("rank") + 1 :][:5] == ["python", "-m", "harness.cli", "train", PRESET]
    assert words[-len(TINY) :] == TINY
    options = {w[0].split("=", 1)[0]: w[0].partition("=")[2] for w in sbatch_view(script)}
    assert (options["--partition"], options["--constraint"], options["--comment"]) == (
        "debug,gpu",
        "[a100|h100]&ib",
        "x,y",
    )


@pytest.mark.tier("integration")
@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--partition", "gpu partition", "is not a Slurm partition name"),
        ("--account", "a,b", "is not a Slurm account name"),
        ("--constraint", "a100&(ib", "is not a Slurm feature expression"),
        ("--constraint", "a100 ib", "is not a Slurm feature expression"),
        ("--sbatch", "--comment=two words", "one sbatch option per --sbatch"),
        ("--sbatch", "-p gpu", "give a long sbatch option"),
        ("--time", " 10", "is not a Slurm time"),
    ],
)
def test_bad_values_one_line(option, value, message, runs):
    code, out, err = cli("submit", PRESET, *TINY, f"{option}={value}", "--dry-run")
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err, err
    assert not runs.exists()


# ----------------------------------------------------------------------------------------- dry run without data
@pytest.mark.tier("integration")
def test_dry_run_without_the_data(runs, tmp_path):
    """On a login node without the dataset: the script is rendered, a warning says the data check was skipped, and
    the script's log folder exists, so `submit --dry-run > job.sbatch; sbatch job.sbatch` works. A real submit
    still refuses in one line."""
    missing = tmp_path / "datasets" / "imagenet"
    code, out, err = cli("submit", IN1K, f"data.root={missing}", "--gpus-per-node", 8, "--dry-run")
    assert code == 0, err
    assert "#SBATCH --gpus-per-node=8" in out
    warning = next(line for line in err.splitlines() if "warning" in line)
    assert "data check skipped" in warning and str(missing) in warning and "only on the cluster" in warning
    output = next(w[0] for w in sbatch_view(out) if w[0].startswith("--output="))
    assert Path(output.partition("=")[2]).parent.is_dir()
    code, out, err = cli("submit", DET, f"data_root={missing}", "--dry-run")  # a fine-tuning config: the same
    assert code == 0 and "data check skipped" in err, err
    code, out, err = cli("submit", IN1K, f"data.root={missing}", "--gpus-per-node", 8)
    assert code == 2 and out == "" and err.count("\n") == 1 and "does not exist" in err, err


@pytest.mark.tier("integration")
def test_memory_default_is_the_clusters(runs):
    code, out, err = cli("submit", PRESET, *TINY, "--dry-run")
    assert code == 0, err
    assert "# no --mem: the cluster's default applies" in out and "--mem" not in sbatch_options_keys(out)
    code, out, err = cli("submit", PRESET, *TINY, "--mem", "64G", "--dry-run")
    assert "#SBATCH --mem=64G" in out and "no --mem" not in out


def sbatch_options_keys(script: str) -> set[str]:
    return {w[0].split("=")[0] for w in sbatch_view(script)}


# ----------------------------------------------------------------------------------------- jobs on broken records


# ----------------------------------------------------------------------------------------- submit --claims (issue 29)
# ScaleNet's runs: the first job trains the four from scratch, the second the two expanded arms, each from its
# source's weights (the shallow run; the source trained to its plateau, Table VII)
FIRST_RUNS = ("converged", "scratch-3x", "shallow", "scratch-compute")
SECOND_RUNS = ("scalenet-converged", "scalenet")


@pytest.fixture
def glyphs_cache(runs, monkeypatch):
    """The claims' glyphs in the default cache, shared with the other claims tests (rendered once per machine;
    the cache is written atomically), not in this module's own data folder."""
    monkeypatch.delenv("DEPTHBENCH_DATA", raising=False)
    return runs


def counting_sbatch(folder: Path) -> Path:
    """A stub sbatch that keeps every script it is given (1.sbatch, 2.sbatch, ...) and answers 101, 102, ..."""
    folder.mkdir()
    (folder / "sbatch").write_text(
        '#!/bin/bash\nn=$(( $(ls "$STUB_DIR"/*.sbatch 2>/dev/null | wc -l) + 1 ))\n'
        'cat > "$STUB_DIR/$n.sbatch"; echo $((100 + n))\n'
    )
    (folder / "sbatch").chmod(0o755)
    return folder


@pytest.mark.tier("integration")
def test_claims_dry_run_puts_each_run_where_claims_reads_it(glyphs_cache, tmp_path):
    out = glyphs_cache / "claims"  # under the runs root: `jobs` reads only records of runs there
    code, script, err = cli("submit", "--claims", "scalenet", "--quick", "--claims-out", out, "--dry-run")
    assert code == 0, err
    first, _, second = script.partition("# ---- the second job")
    assert second, "the expanded arm waits for the shallow run's weights: a second job"
    for arm in ("shallow", "scratch-3x", "scratch-compute"):
        assert f"WORK_DIR={out}/runs/scalenet/{arm}/seed200\n" in first
    assert f"WORK_DIR={out}/runs/scalenet/scalenet/seed200\n" in second and "scalenet/scalenet" not in first
    assert f"model.pretrained='\"'\"'{out}/runs/scalenet/shallow/seed200/best.pth" in second
    # the claims file's --quick overrides, one seed: the first evaluation seed (the tuning seeds 0-2 are not used)
    assert "epochs=1" in first and "seed=200" in first
    assert "--dependency=afterok:<first job id>" in err


@pytest.mark.tier("integration")
def test_claims_submission_waits_for_sources_and_skips_done_runs(glyphs_cache, tmp_path, monkeypatch):
    from harness.core.rundir import RunDir
    from harness.engine.builders import load_training_config
    from results.claims import REPO, load_claims, plan_runs

    stub = counting_sbatch(tmp_path / "stub-bin")
    monkeypatch.setenv("PATH", f"{stub}:{os.environ['PATH']}")
    monkeypatch.setenv("STUB_DIR", str(stub))
    out = glyphs_cache / "claims"  # under the runs root: `jobs` reads only records of runs there
    code, stdout, err = cli("submit", "--claims", "scalenet", "--quick", "--claims-out", out)
    assert code == 0, err
    first, second = (stub / "1.sbatch").read_text(), (stub / "2.sbatch").read_text()
    assert "#SBATCH --array=0-3" in first and "--dependency" not in first
    assert "#SBATCH --dependency=afterok:101" in second and "#SBATCH --array=0-1" in second
    assert all(f"scalenet/{arm}/seed200" in second for arm in SECOND_RUNS)
    assert "submitted job 102" in stdout and "depthbench claims scalenet --quick" in stdout
    records = [json.loads((glyphs_cache / "slurm" / f"{job}.json").read_text()) for job in (101, 102)]
    assert [e["work_dir"] for r in records for e in r["elements"]] == [
        str(out / "runs" / "scalenet" / arm / "seed200") for arm in FIRST_RUNS + SECOND_RUNS
    ]

    # the shallow run is done (its recipe recorded as train records it, and its weights): submitted again, it is
    # skipped, and the arm expanded from it no longer waits: it joins the first job; the other expanded arm still
    # waits for its source
    spec = next(s for s in plan_runs(load_claims("scalenet"), 1, True, out) if s.arm == "shallow")
    shallow = spec.work_dir
    run = RunDir.create("claims-scalenet-shallow", path=shallow)
    run.write_config("", load_training_config(REPO / spec.config, spec.overrides)[0].to_dict())
    run.finish("done")
    (shallow / "best.pth").write_bytes(b"weights")
    for old in stub.glob("*.sbatch"):
        old.unlink()
    code, stdout, err = cli("submit", "--claims", "scalenet", "--quick", "--claims-out", out)
    assert code == 0, err
    assert f"not submitted: scalenet/shallow/seed200: done in {shallow}" in err
    assert sorted(p.name for p in stub.glob("*.sbatch")) == ["1.sbatch", "2.sbatch"]
    script, waiting = (stub / "1.sbatch").read_text(), (stub / "2.sbatch").read_text()
    assert "#SBATCH --array=0-3" in script and "scalenet/scratch-3x/seed200" in script
    assert "scalenet/scalenet/seed200" in script and f"{shallow}/best.pth" in script
    assert "scalenet/scalenet-converged/seed200" in waiting and "scalenet/scalenet/seed200" not in waiting


@pytest.mark.tier("integration")
@pytest.mark.parametrize(
    "args, message",
    [
        (["--claims", "scalenet", "epochs=1"], "--claims trains the claims' own recipes"),
        (["--claims", "scalenet", PRESET], "give either --claims PAPER, --table PAPER:TABLE or config files"),
        (["--claims", "nosuchpaper"], "nosuchpaper"),
        (["--claims", "scalenet", "--seeds", "0"], "--seeds 0"),
        ([PRESET, "--quick"], "--seeds, --quick, --scale and --claims-out go with --claims PAPER"),
        ([PRESET, "--scale", "paper"], "--seeds, --quick, --scale and --claims-out go with --claims PAPER"),
    ],
)
def test_claims_submission_bad_input_is_one_line(args, message, glyphs_cache, tmp_path):
    code, out, err = (
        cli("submit", *args, "--claims-out", glyphs_cache / "c", "--dry-run")
        if "--claims" in args
        else cli("submit", *args, "--dry-run")
    )
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (glyphs_cache / "c").exists()


def test_claims_out_outside_the_runs_root_is_refused_in_one_line(runs, tmp_path):
    """``jobs`` and ``cancel`` act only on runs under the runs root or the claims folders (a record naming another
    folder is refused as untrusted), so a submission training elsewhere would be invisible to them: refused first,
    nothing written."""
    code, out, err = cli(
        "submit", "--claims", "scalenet", "--quick", "--claims-out", tmp_path / "elsewhere", "--dry-run"
    )
    assert code == 2 and "--claims-out" in err and "outside the runs root" in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "elsewhere").exists()
    assert not (runs / "slurm").exists() or not any((runs / "slurm").iterdir())
