# TransNeXt Table 12, TransNeXt-Base: as the Tiny config with stage widths 96-192-384-768, drop path 0.6 (paper;
# official config 0.7), and fp16 with a static loss scale of 512 (the official Base config).
_base_ = ['./mask-rcnn_transnext-tiny_fpn_1x_coco.py']
pretrained = 'checkpoints/transnext_base_224_1k.pth'
model = dict(
    backbone=dict(
        model_name='transnext_base', drop_path_rate=0.6, init_cfg=dict(type='Pretrained', checkpoint=pretrained)
    ),
    neck=dict(in_channels=[96, 192, 384, 768]),
)
optim_wrapper = dict(type='AmpOptimWrapper', loss_scale=512.0)
