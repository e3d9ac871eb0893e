# DeiT's recipe (facebookresearch/deit main.py defaults): AdamW, lr 5e-4 x batch/512, wd 0.05 (none on norms,
# biases, 1-D params), cosine to 1e-5 after 5 warm-up epochs from 1e-6, stepped per epoch, no clipping, EMA 0.99996.
_base_ = ['../default_runtime.py']

epochs = 300
batch_size = 1024
precision = 'bf16'  # DeiT/Swin/TransNeXt/ScaleNet train with AMP; bf16 autocast (fp16 where no bf16)
optim = dict(
    opt='adamw',
    lr=5e-4,
    lr_base_batch=512,  # lr is scaled by batch_size / lr_base_batch (None: no scaling)
    weight_decay=0.05,
    momentum=0.9,  # SGD-family only; ignored by AdamW
    eps=1e-8,
    betas=(0.9, 0.999),
    filter_bias_and_bn=True,
    layer_decay=None,
)
sched = dict(  # timm create_scheduler_v2 arguments
    sched='cosine',
    warmup_epochs=5,
    warmup_lr=1e-6,
    min_lr=1e-5,
    decay_milestones=None,  # 'multistep': epochs from which lr *= decay_rate (PyTorch MultiStepLR meaning)
    decay_rate=0.1,
    cooldown_epochs=0,
    step_on_epochs=True,  # False: the schedule advances every optimizer step
)
ema = dict(enable=True, decay=0.99996, warmup=False)
