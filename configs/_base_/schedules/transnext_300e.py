# TransNeXt's recipe (paper Table 4 + official classification/main.py): AdamW (0.9, 0.999), lr 1e-3 for every
# model with NO linear scaling, wd 0.05, cosine to 1e-5 after 5 linear warm-up epochs from 1e-6 (stepped per
# epoch), gradient clipping 1.0, no EMA, best checkpoint kept; batch 1024 (8 x 128).
_base_ = ['./deit_300e.py']
optim = dict(lr=1e-3, lr_base_batch=None)
clip_grad = 1.0
ema = dict(enable=False)
