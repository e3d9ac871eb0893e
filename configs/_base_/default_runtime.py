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

epochs = 300
batch_size = 1024          # GLOBAL images per optimizer step = processes x per-process batch x grad_accum
grad_accum = 1
clip_grad = None           # max gradient norm, None: no clipping
eval_interval = 1          # epochs between evaluations (the last epoch is always evaluated)
log_interval = 10          # optimizer steps between metrics.jsonl lines
log = dict(tensorboard=True)
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
distill = dict(            # distillation when `teacher` is set (harness.losses.TrainingLoss):
    kind='soft',           # 'soft': soft labels (SReT Eq. 17); 'hard': DeiT's GT + hard distillation
    teacher=None,          # timm name of the teacher, e.g. 'regnety_160'
    teacher_checkpoint=None,
    teacher_kwargs=dict(),
    temperature=1.0,
    weight=1.0,            # soft: loss = (1 - weight) * task + weight * KD, SReT: 1 (no one-hot term); hard: alpha
)
