# HO-ResNet's CIFAR-10 recipe (paper §3.1): SGD momentum 0.9 (no Nesterov: timm's 'momentum'), lr 0.1, weight
# decay 1e-4 on every parameter, MultiStepLR x0.1 at epochs 100/150/200/230 stepped per epoch, no warm-up,
# 260 epochs, batch 128, plain cross-entropy.
_base_ = ['../default_runtime.py']

epochs = 260
batch_size = 128
optim = dict(
    opt='momentum',
    lr=0.1,
    lr_base_batch=None,
    weight_decay=1e-4,
    momentum=0.9,
    eps=None,
    betas=None,
    filter_bias_and_bn=False,  # decay on BN and the step size h too (the paper does not say; docs/horesnet.md)
    layer_decay=None,
)
sched = dict(
    sched='multistep',
    warmup_epochs=0,
    warmup_lr=0.0,
    min_lr=0.0,
    decay_milestones=[100, 150, 200, 230],
    decay_rate=0.1,
    cooldown_epochs=0,
    step_on_epochs=True,
)
