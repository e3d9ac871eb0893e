"""``depthbench data``: datasets made for clusters.

    depthbench data pack IMAGEFOLDER OUT [--shard-size 1000] [--splits train val]

    from harness.commands.data import run_pack
    info = run_pack("data/imagenet", "data/imagenet-shards")

``pack`` writes each split of an ImageFolder (``IMAGEFOLDER/<split>/<class>/<image>``) as tar shards in WebDataset's
layout with timm's ``_info.json`` and our index of member offsets (harness/tasks/shards.py); train from them with
``data.type=shards data.root=OUT`` (or read them with timm/WebDataset: ``data.type=wds``). See docs/data.md.
"""

from __future__ import annotations

from pathlib import Path

from harness.core.wording import plural

__all__ = ["run_pack", "add_parser", "main"]


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "data",
        help="pack an ImageFolder into tar shards with an index (for clusters)",
        description=__doc__.split("\n\n")[0],
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    pack = actions.add_parser("pack", help="IMAGEFOLDER -> OUT: tar shards + _info.json + index per split")
    pack.add_argument("folder", metavar="IMAGEFOLDER", help="<folder>/<split>/<class>/<image>")
    pack.add_argument("out", metavar="OUT", help="a new (or empty) folder for the shards")
    pack.add_argument("--shard-size", type=int, default=1000, help="images per shard (default 1000)")
    pack.add_argument("--splits", nargs="+", default=["train", "val"], help="split folders to pack (default train val)")
    p.set_defaults(func=main)


def main(args) -> int:
    info = run_pack(args.folder, args.out, splits=tuple(args.splits), shard_size=args.shard_size)
    for split, entry in info["splits"].items():
        print(f"{split}: {plural(entry['num_samples'], 'image')} in {plural(len(entry['filenames']), 'shard')}")
    print(f"wrote {Path(args.out)}; train with data.type=shards data.root={args.out}")
    return 0


def run_pack(folder: str | Path, out: str | Path, *, splits=("train", "val"), shard_size: int = 1000) -> dict:
    """Pack ``folder``'s splits into ``out``; returns the ``_info.json`` written (see the module docstring)."""
    from harness.tasks.shards import pack

    return pack(folder, out, splits=splits, shard_size=shard_size)
