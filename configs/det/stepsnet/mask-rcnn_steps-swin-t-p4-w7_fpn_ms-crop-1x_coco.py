# StepsNet Table 2a, Steps-Swin-T row: the Swin-T config with the backbone swapped for depthbench's Steps-Swin-T
# (timm model `steps_swin_tiny`). Its stage 4 is 544 wide (the widest non-empty step, StepsNet Table 14), so the
# stage-4 output norm and FPN input are 544. `strict_img_size=False` runs any input size; `always_partition`
# keeps shifted windows in every odd block at detection sizes, as mmdet's Swin does.
# Pretrained weights: the ImageNet run of configs/stepsnet/steps-swin-tiny_8xb128-300e_in1k.py — set
#   model.backbone.init_cfg.checkpoint=results/runs/<experiment>/<run>   (a run directory or a .pth file)
_base_ = ['./mask-rcnn_swin-t-p4-w7_fpn_ms-crop-1x_coco.py']
pretrained = 'checkpoints/steps_swin_tiny_in1k.pth'
model = dict(
    backbone=dict(
        _delete_=True,
        type='DepthbenchBackbone',
        model_name='steps_swin_tiny',
        model_kwargs=dict(strict_img_size=False, always_partition=True),
        out_indices=(0, 1, 2, 3),
        drop_path_rate=0.2,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained),
    ),
    neck=dict(in_channels=[96, 192, 384, 544]),
)
