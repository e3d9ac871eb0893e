# Swin's recipe (microsoft/Swin-Transformer config.py defaults): AdamW, base lr 5e-4 x batch/512 (1e-3 at 1024),
# wd 0.05, eps 1e-8, cosine per step after 20 warm-up epochs, warm-up/min lr 5e-7/5e-6 x batch/512 (the values
# below are for batch 1024), gradient clipping 5.0, no EMA. (No repeated augmentation: recipes set
# data.repeated_aug=False.)
_base_ = ['./deit_300e.py']
optim = dict(lr=5e-4, lr_base_batch=512)
sched = dict(warmup_epochs=20, warmup_lr=1e-6, min_lr=1e-5, step_on_epochs=False)
clip_grad = 5.0
ema = dict(enable=False)
