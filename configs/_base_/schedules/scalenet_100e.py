# ScaleNet's ImageNet recipe for the expanded model (paper Sec. IV-A): AdamW, peak lr 2e-4 cosine to 2e-6, 100 epochs,
# global batch 512 (8 x 64, no linear scaling needed), Swin's other defaults [assumed]: wd 0.05, eps 1e-8,
# clip 5.0, warm-up 5 epochs from 5e-7 (not stated for 100 epochs), no EMA; Swin augmentation (no repeated aug).
_base_ = ['./swin_300e.py']
epochs = 100
batch_size = 512
optim = dict(lr=2e-4, lr_base_batch=None)
sched = dict(warmup_epochs=5, warmup_lr=5e-7, min_lr=2e-6)
