# The claims' one optimizer recipe (docs/claims.md): AdamW, cosine decay stepped every update after a linear
# warm-up over the first 10 % of an epoch, weight decay 0.05 (none on norms and biases), batch 64, fp32, no EMA,
# no mixup. Both arms of a comparison inherit it unchanged; a family's base lr is set once, on its baseline arm.
# (SGD at 0.02-0.1 -- HO-ResNet's CIFAR recipe -- stayed at chance for 2+ epochs on the glyphs with ResNet-18 and
# HO-ResNet-10, AdamW learned from the first epoch: docs/claims.md.)
_base_ = ['../../_base_/schedules/deit_300e.py']
batch_size = 64
precision = 'fp32'  # CPUs without bf16 units are faster in fp32
optim = dict(lr=2e-3, lr_base_batch=None, weight_decay=0.05)
sched = dict(sched='cosine', warmup_epochs=0.1, warmup_lr=1e-6, min_lr=1e-5, step_on_epochs=False)
ema = dict(enable=False)
log_interval = 50
