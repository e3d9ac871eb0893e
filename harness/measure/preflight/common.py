"""What every preflight check shares: what is checked (:class:`Target`, :class:`Options`; the layout the runs
will get is :class:`harness.measure.layout.Layout`), what a check gives (:class:`Check`) and what rank 0 returns
(:class:`Report`), the rank a check runs on (:class:`Rank`) and the few number formats the report lines use."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from harness.core.errors import DepthbenchError

VERDICTS = ("ok", "warn", "fail")
MIB = 2**20


# ----------------------------------------------------------------------------------------------- what is checked
@dataclass
class Target:
    """One CONFIG to check, with its ``key=value`` overrides; ``label`` names it in the report."""

    config: str
    overrides: tuple = ()
    label: str = ""

    def __post_init__(self):
        self.overrides = tuple(self.overrides)
        self.label = self.label or " ".join([Path(self.config).stem, *self.overrides])


@dataclass
class Options:
    """How hard each check looks. None picks a default by device (CUDA / CPU)."""

    device: str | None = None  # cpu | cuda (None: cuda when visible)
    steps: int | None = None  # timed training steps per config (10 / 3)
    step_seconds: float | None = None  # time box of one config's step measurement (60 / 60 s)
    loader_seconds: float | None = None  # time box of one config's loader measurement (20 / 10 s)
    allreduce_mib: tuple | None = None  # message sizes (1,16,128,512 / 1,4,16 MiB) plus each model's gradients
    disk_mib: int | None = None  # the largest checkpoint the write test writes (4096 / 256 MiB)
    timeout_s: int = 300  # rendezvous and collectives

    def resolved(self, device: str) -> "Options":
        cuda = device == "cuda"
        return Options(
            device,
            self.steps or (10 if cuda else 3),
            self.step_seconds or 60.0,
            self.loader_seconds or (20.0 if cuda else 10.0),
            tuple(self.allreduce_mib or ((1, 16, 128, 512) if cuda else (1, 4, 16))),
            self.disk_mib or (4096 if cuda else 256),
            self.timeout_s,
        )


# ----------------------------------------------------------------------------------------------- what comes back
@dataclass
class Check:
    """One line of the report: which check, its verdict, the line itself and the number behind it."""

    check: str
    verdict: str  # ok | warn | fail
    text: str
    value: float | None = None  # the number the verdict rests on, in ``unit``
    unit: str = ""
    config: str | None = None  # the CONFIG's label, for per-config checks
    node: str = ""
    rank: int | None = None  # None: a check of all ranks together
    data: dict = field(default_factory=dict)


@dataclass
class Report:
    """What rank 0 returns: every check, the record written (``path``), its rendering and the exit code."""

    checks: list[Check]
    record: dict
    path: Path | None
    text: str
    exit_code: int
    shown: bool = False  # already printed (by rank 0's own process under ``--nproc``)


# ----------------------------------------------------------------------------------------------- the rank checked
@dataclass
class Rank:
    """The rank a check runs on, and what the environment checks learned about it that later checks use."""

    rank: int
    local_rank: int
    local_world: int
    node: str
    device: str  # cpu | cuda: what this rank really has
    versions: dict = field(default_factory=dict)  # the versions check's; gathered for same-software
    device_name: str = ""  # the devices check's; named in the record
    free_bytes: int | None = None  # the memory check's; the step check's peak must fit in it
    fp32_gflops: float | None = None  # the bf16 check's matmul rates; the step check predicts its time
    bf16_gflops: float | None = None  # from them before it starts a step

    def check(self, check_name: str, verdict: str, text: str, value=None, unit="", config=None, **data) -> Check:
        """A :class:`Check` of this rank (``value`` rounded to 4 decimals)."""
        return Check(
            check_name,
            verdict,
            text,
            None if value is None else round(float(value), 4),
            unit,
            config,
            self.node,
            self.rank,
            data,
        )

    def guarded(self, name: str, config: str | None, fn: Callable):
        """``fn()``, or a ``fail`` check naming its exception: one broken check never hides the others."""
        try:
            return fn()
        except Exception as e:
            return self.check(name, "fail", f"{name} check failed: {one_line(e)}", config=config)


# ----------------------------------------------------------------------------------------------- formats
def one_line(e: BaseException) -> str:
    """An exception as one report line: a DepthbenchError's own text, else its type and text (300 characters)."""
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:300]}" if not isinstance(e, DepthbenchError) else text


def size_text(nbytes: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:,.1f} {unit}"
    return f"{nbytes} B"


def seconds_text(seconds: float) -> str:
    return f"{seconds:,.1f} s" if seconds >= 1 else f"{seconds * 1000:,.0f} ms"
