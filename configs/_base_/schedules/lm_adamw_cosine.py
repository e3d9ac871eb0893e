# Language-model recipe for StepsNet Table 4 [ASSUMED: the paper gives only the batch, 0.128M tokens = 1024
# sequences of 128]: AdamW (lr 6e-4, betas 0.9/0.95, wd 0.1), per-step cosine after warm-up, clipping at 1.0.
_base_ = ['../default_runtime.py']
ckpt = dict(best_metric='ppl')  # lowest validation perplexity

epochs = 20
batch_size = 1024
precision = 'bf16'
clip_grad = 1.0
optim = dict(
    opt='adamw',
    lr=6e-4,
    lr_base_batch=None,
    weight_decay=0.1,
    momentum=0.9,
    eps=1e-8,
    betas=(0.9, 0.95),
    filter_bias_and_bn=True,
    layer_decay=None,
)
sched = dict(
    sched='cosine',
    warmup_epochs=1,
    warmup_lr=1e-6,
    min_lr=6e-5,
    decay_milestones=None,
    decay_rate=0.1,
    cooldown_epochs=0,
    step_on_epochs=False,
)
