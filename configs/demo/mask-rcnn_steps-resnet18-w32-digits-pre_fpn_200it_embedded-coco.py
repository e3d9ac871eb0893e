# make demo (harness/commands/demo.py): Mask R-CNN on the embedded COCO-format shapes set, the half-width Steps-ResNet-18
# backbone initialised from the demo's digits pretraining (steps-resnet18-w32_1xb64-8e_digits.py) through the
# one weights loader: the demo sets  model.backbone.init_cfg.checkpoint=<its run dir>/best.pth  (by hand: the
# same override with a depthbench best.pth of that model). 200 iterations instead of the preset's 500.
_base_ = ['../det/mask-rcnn_steps-resnet18-w32_fpn_500it_embedded-coco.py']
scale = 'embedded coco-shapes 128px, 200 iterations, backbone pretrained on digits'
model = dict(backbone=dict(init_cfg=dict(_delete_=True, type='Pretrained', checkpoint=None)))  # the demo fills it in
max_iters = 200
val_interval = 200
train_cfg = dict(max_iters=max_iters, val_interval=val_interval)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=20),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=False, begin=20, end=max_iters),
]
default_hooks = dict(checkpoint=dict(interval=val_interval))
