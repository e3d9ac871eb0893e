# Embedded preset: a 4-block DeiT-Tiny on the bundled digits at 16x16 (patch 4 -> 16 tokens of 2x2 original
# pixels) with the DeiT recipe scaled down (AdamW, cosine after warm-up, Mixup, label smoothing, EMA) -- minutes
# on a laptop CPU, no download.
_base_ = ['../_base_/datasets/digits.py', '../_base_/schedules/deit_300e.py']
model = dict(name='deit_tiny_patch16_224', img_size=16, patch_size=4, depth=4, drop_path_rate=0.0)
epochs = 30
batch_size = 64
optim = dict(lr=1e-3, lr_base_batch=None)
sched = dict(warmup_epochs=2)
data = dict(input_size=16)
aug = dict(mixup=0.1, cutmix=0.0, smoothing=0.1)
ema = dict(enable=True, decay=0.99)
log_interval = 5
precision = 'fp32'  # CPUs without bf16 units are faster in fp32
