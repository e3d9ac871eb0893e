# The engine's defaults: every key `depthbench train` reads is defined here (datasets/ and schedules/ fill in
# data/aug and optim/sched). Command-line `key=value` overrides may only name keys that exist; `+key=value` adds one.
experiment = None          # results/runs/<experiment>/<run-id>; None: the config file's name
seed = 0
deterministic = False      # torch.use_deterministic_algorithms; CPU runs resume bit-identically without it
engine = 'accelerate'      # 'accelerate' (DDP) or 'deepspeed' (ZeRO); --engine overrides
precision = 'fp32'         # 'fp32', 'bf16' or 'fp16' (autocast; fp16 only on CUDA, CPU falls back to bf16)
deepspeed = dict(
    zero_stage=2,          # 0-3; 3 shards the weights too (no EMA then)
    config=dict(),         # merged into the DeepSpeed config we build (e.g. zero_optimization=dict(overlap_comm=True))
)
find_unused_parameters = False

# Speed options (issue 27; docs/training.md "Speed options"). Each is off by default, and off, training is
# bit-identical to a run without the option. --compile/--channels-last/--grad-checkpointing set them too.
compile = dict(
    enable=False,          # torch.compile the model's training forward (and backward); evaluation runs eagerly
    mode=None,             # None (inductor's default), 'reduce-overhead' (CUDA graphs), 'max-autotune', ...
    backend='inductor',
    dynamic=False,         # the training shapes are fixed (drop_last): one graph, no dynamic-shape kernels
)
channels_last = False      # NHWC weights and image batches (CNNs and conv stems on GPUs with tensor cores)
grad_checkpointing = False # the model's set_grad_checkpointing(True): recompute activations in backward
optim = dict(
    fused=None,            # True: torch's fused kernel (AdamW/Adam/SGD/Adagrad; CPU and CUDA); None: torch's default
    foreach=None,          # True/False: torch's multi-tensor (foreach) implementation; None: torch's default
)
loader = dict(
    device_normalize=False,  # image batches leave the workers as uint8 and are normalised (and randomly erased)
                             # on the training device: timm's prefetcher, 4x less to collate, pin and copy
    prefetch_factor=None,    # batches each loader worker keeps ready (None: torch's default, 2)
    persistent_workers=True, # keep loader workers alive between epochs
)

epochs = 300
batch_size = 1024          # GLOBAL images per optimizer step = processes x per-process batch x grad_accum
grad_accum = 1
clip_grad = None           # max gradient norm, None: no clipping
eval_interval = 1          # epochs between evaluations (the last epoch is always evaluated)
log_interval = 10          # optimizer steps between metrics.jsonl lines
log = dict(tensorboard=True)
hang = dict(                # a rank's hang watchdog (harness/engine/watchdog.py) and the collectives' timeout
    watchdog=True,         # dump every rank's stacks and exit 76 (requeued) when a training step takes longer than
    factor=20.0,           # ... max(factor x the median step x log_interval, floor_s) seconds
    floor_s=300.0,
    collective_timeout_s=1800,  # the process group's timeout (torch's default: 10 min NCCL, 30 min gloo)
)
ckpt = dict(
    interval_steps=0,      # also write last.pth every N optimizer steps (0: only at epoch ends and on signals)
    interval_minutes=30,   # ... and at least this often (None: off)
    best_metric='top1',    # eval metric that picks best.pth ('top1', 'top5', 'ema_top1')
)

model = dict(
    name=None,             # any timm-registered name, ours included (`depthbench models`)
    pretrained=None,       # path to weights to start from (loaded with weights_only=True)
    # every other key is passed to timm.create_model (drop_path_rate=..., img_size=...); ScaleNet adds
    # grow=dict(k=2, ...) (expand once after loading `pretrained`) or grow=dict(stages=[dict(epoch=.., ...)])
)
ema = dict(enable=False, decay=0.99996, warmup=False)
distill = dict(            # distillation when `teacher` is set (harness.engine.losses.TrainingLoss):
    kind='soft',           # 'soft': soft labels (SReT Eq. 17); 'hard': DeiT's GT + hard distillation
    teacher=None,          # timm name of the teacher, e.g. 'regnety_160'
    teacher_checkpoint=None,
    teacher_kwargs=dict(),
    temperature=1.0,
    weight=1.0,            # soft: loss = (1 - weight) * task + weight * KD, SReT: 1 (no one-hot term); hard: alpha
)
