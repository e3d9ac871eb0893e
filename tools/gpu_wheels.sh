#!/usr/bin/env bash
# Wheels of what a bare GPU machine lacks for the GPU check (tools/gpu_check.sh), into .whl/ (ignored: .gitignore's
# *.whl; the device tool carries it when asked: carry [".whl"]).
#
#   tools/gpu_wheels.sh            # here, with network to the package index; lists the wheels and their total size
#
# That machine (docs/preflight.md, "The GPU check") has Python 3.12 with torch, timm, accelerate, numpy, PyYAML,
# rich and opencv, but no pytest (the check is tests), no mmengine (depthbench reads configs with it) and no
# DeepSpeed, and no network. So: pytest and pytest-timeout (the check's time limits) with what pytest needs
# (pluggy, iniconfig, packaging, pygments: 1.8 MiB together); timm, because the node's own timm, though it says
# 1.0.31, is another build than the index's 1.0.31 (no swin_transformer.resolve_stage_window_sizes, which
# models/stepsnet.py imports: both GPU sessions' first calls failed at that import, 26 and 29 Nov 2026); mmengine
# and the pure-Python packages it needs there (addict, yapf, platformdirs, termcolor), and DeepSpeed -- an sdist,
# built into a py3 wheel here -- with what it needs there (hjson, pydantic and its parts, a typing-extensions new
# enough for them, einops and msgpack, which its flops profiler and pipeline modules import at the top,
# py-cpuinfo; pydantic-core and msgpack are compiled: their cp312 manylinux wheels); tabulate for
# benchmarks/loader_throughput.py. tests/tools/test_gpu_node_env.py refuses every package the node lacks and imports
# the GPU check with these: a package missing here fails it. Versions are requirements/lock.txt's. Everything
# together must stay under 64 MiB (what travels with a checkout to that machine); tools/gpu_check.sh installs them
# there with --no-index.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=.whl
PYTHON=${PYTHON:-python3}
PURE=(pytest pytest-timeout pluggy iniconfig packaging pygments timm
      mmengine addict yapf platformdirs termcolor hjson pydantic annotated-types typing-inspection typing-extensions
      einops py-cpuinfo tabulate)
COMPILED=(pydantic-core msgpack)
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
           --platform manylinux2014_x86_64)

pinned() {  # the lock file's version of a distribution (names compared as pip does: case, - and _ alike)
    "$PYTHON" - "$1" <<'PY'
import re, sys
want = re.sub(r"[-_.]+", "-", sys.argv[1]).lower()
for line in open("requirements/lock.txt"):
    name, sep, version = line.strip().partition("==")
    if sep and re.sub(r"[-_.]+", "-", name).lower() == want:
        print(version.split(";")[0].strip()); break
else:
    sys.exit(f"{sys.argv[1]} is not in requirements/lock.txt")
PY
}

rm -rf "$DEST" && mkdir -p "$DEST"
for name in "${PURE[@]}" "${COMPILED[@]}"; do
    "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        "${PLATFORMS[@]}" -d "$DEST" "$name==$(pinned "$name")"
done
"$PYTHON" -m pip wheel -q --no-deps -w "$DEST" "deepspeed==$(pinned deepspeed)"
ls -1 "$DEST"
total=$(du -cb "$DEST"/*.whl | tail -n1 | cut -f1)
echo "total $((total / 1024)) KiB in $DEST"
if (( total > 64 * 1024 * 1024 )); then echo "error: over 64 MiB" >&2; exit 1; fi
