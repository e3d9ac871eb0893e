"""The local data of depthbench_tiny_mc.yaml: tiny_mc.jsonl next to this file as a datasets.DatasetDict (no hub)."""

import json
from pathlib import Path


def load(**metadata):
    import datasets

    rows = [json.loads(line) for line in (Path(__file__).parent / "tiny_mc.jsonl").read_text().splitlines() if line]
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)})
