# GENERATED from harness/core/schema.py, the one source of every config key's default, type, range and
# help: edit the schema, then `python -m harness.core.schema --write` (a test keeps the two equal).
# Datasets (_base_/datasets/) and schedules (_base_/schedules/) fill in data/aug and optim/sched.
# Command-line `key=value` overrides may only name keys that exist; `+key=value` adds one.
# `depthbench train --help-config` lists every key with its range (docs/config.md).
# results/runs/<experiment>/<run-id>; None: the config file's name
experiment = None
# seeds python, numpy, torch and the loaders
seed = 0
# torch.use_deterministic_algorithms; CPU runs resume bit-identically without it
deterministic = False
# 'accelerate' (DDP) or 'deepspeed' (ZeRO); --engine overrides
engine = 'accelerate'
# autocast dtype (fp16 only on CUDA, CPU falls back to bf16)
precision = 'fp32'
deepspeed = dict(
    # 0-3; 3 shards the weights too (no EMA then)
    zero_stage=2,
    # merged into the DeepSpeed config we build (e.g. zero_optimization=dict(overlap_comm=True))
    config=dict(),
)
# DDP's find_unused_parameters
find_unused_parameters = False

# Speed options (issue 27; docs/training.md "Speed options"). Each is off by default, and off, training is bit-
# identical to a run without the option. --compile/--channels-last/--grad-checkpointing set them too.
compile = dict(
    # torch.compile the model's training forward (and backward); evaluation runs eagerly
    enable=False,
    # None (inductor's default), 'reduce-overhead' (CUDA graphs), 'max-autotune', ...
    mode=None,
    # a torch.compile backend (torch._dynamo.list_backends())
    backend='inductor',
    # the training shapes are fixed (drop_last): one graph, no dynamic-shape kernels
    dynamic=False,
)
# NHWC weights and image batches (CNNs and conv stems on GPUs with tensor cores)
channels_last = False
# the model's set_grad_checkpointing(True): recompute activations in backward
grad_checkpointing = False
optim = dict(
    # True: torch's fused kernel (AdamW/Adam/SGD/Adagrad; CPU and CUDA); None: torch's default
    fused=None,
    # True/False: torch's multi-tensor (foreach) implementation; None: torch's default
    foreach=None,
)
loader = dict(
    # 'cpu': timm's transforms in the loader workers; 'device': workers read bytes, the training device decodes
    # (nvJPEG) and augments in batches (docs/data.md)
    pipeline='cpu',
    # image batches leave the workers as uint8 and are normalised (and randomly erased) on the training device: timm's
    # prefetcher
    device_normalize=False,
    # batches each loader worker keeps ready (None: torch's default, 2)
    prefetch_factor=None,
    # keep loader workers alive between epochs
    persistent_workers=True,
)
# epochs to train (an override rescales the schedule's epoch counts)
epochs = 300
# GLOBAL images per optimizer step = processes x per-process batch x grad_accum
batch_size = 1024
# micro-batches per optimizer step
grad_accum = 1
# max gradient norm, None: no clipping
clip_grad = None
# epochs between evaluations (the last epoch is always evaluated)
eval_interval = 1
# optimizer steps between metrics.jsonl lines
log_interval = 10
log = dict(
    # TensorBoard events in the run directory's tb/
    tensorboard=True,
)
hang = dict(
    # a rank's hang watchdog (harness/engine/watchdog.py): dump every rank's stacks and exit 76 (requeued) when a
    # training step takes longer than the bound below
    watchdog=True,
    # ... max(factor x the median step x log_interval, floor_s) seconds
    factor=20.0,
    # the least time a step may take before it counts as hung
    floor_s=300.0,
    # the process group's timeout (torch's default: 10 min NCCL, 30 min gloo)
    collective_timeout_s=1800,
)
testing = dict(
    # TEST SWITCH, off unless set (docs/trust.md): the rank below SIGKILLs itself after this optimizer step, on every
    # attempt (tries the requeue rules on a cluster)
    kill_at_step=None,
    # ... that rank (None: the last)
    kill_rank=None,
    # TEST SWITCH, off at 0: every rank sleeps this long after each optimizer step (a job that only has to be training
    # when a signal comes idles instead)
    step_delay_s=0.0,
)
ckpt = dict(
    # also write last.pth every N optimizer steps (0: only at epoch ends and on signals)
    interval_steps=0,
    # ... and at least this often (None: off)
    interval_minutes=30,
    # eval metric that picks best.pth ('top1', 'top5', 'ema_top1'; the task's metrics)
    best_metric='top1',
)

# every model key other than name/pretrained is passed to timm.create_model (drop_path_rate=..., img_size=...);
# ScaleNet adds grow=dict(k=2, ...) (expand once after loading `pretrained`) or grow=dict(stages=[dict(epoch=..,
# ...)])
model = dict(
    # any timm-registered name, ours included (`depthbench models`)
    name=None,
    # path to weights to start from (loaded with weights_only=True)
    pretrained=None,
)
ema = dict(
    # timm's ModelEmaV3 of the weights
    enable=False,
    # EMA decay per optimizer step
    decay=0.99996,
    # timm's EMA warm-up
    warmup=False,
)

# distillation when `teacher` is set (harness.tasks.losses.TrainingLoss)
distill = dict(
    # 'soft': soft labels (SReT Eq. 17); 'hard': DeiT's GT + hard distillation
    kind='soft',
    # timm name of the teacher, e.g. 'regnety_160'; None: no distillation
    teacher=None,
    # the teacher's trained weights
    teacher_checkpoint=None,
    # passed to timm.create_model for the teacher
    teacher_kwargs=dict(),
    # softmax temperature of the soft targets
    temperature=1.0,
    # soft: loss = (1 - weight) * task + weight * KD, SReT: 1 (no one-hot term); hard: alpha
    weight=1.0,
)
