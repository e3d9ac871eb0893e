# TransNeXt-Base fine-tuned at 384 from its 224 weights (paper Table 4): 5 epochs, constant lr 1e-5, no
# warm-up, drop path 0.8, CutMix off, evaluation warps to 384x384 without cropping.
# Set model.pretrained to the 224 checkpoint (a run's best.pth or the official weights).
_base_ = ['../_base_/datasets/imagenet.py', '../_base_/schedules/transnext_300e.py']
model = dict(name='transnext_base_384', pretrained='checkpoints/transnext_base_224_1k.pth', drop_path_rate=0.8)
epochs = 5
optim = dict(lr=1e-5)
sched = dict(sched='constant', warmup_epochs=0, min_lr=1e-5)
data = dict(input_size=384, crop_pct=1.0, crop_mode='squash')
aug = dict(cutmix=0.0)
