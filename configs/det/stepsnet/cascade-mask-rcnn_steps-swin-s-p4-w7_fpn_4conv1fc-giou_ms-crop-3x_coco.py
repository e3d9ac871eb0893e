# StepsNet Table 2b, Steps-Swin-S row: the Swin Cascade Mask R-CNN 3x recipe with depthbench's
# `steps_swin_small` (stage 4 is 544 wide, StepsNet Table 14); see the Mask R-CNN config for the
# backbone arguments. Pretrained: model.backbone.init_cfg.checkpoint=<run directory or .pth>.
_base_ = ['./cascade-mask-rcnn_swin-t-p4-w7_fpn_4conv1fc-giou_ms-crop-3x_coco.py']
pretrained = 'checkpoints/steps_swin_small_in1k.pth'
model = dict(
    backbone=dict(
        _delete_=True,
        type='DepthbenchBackbone',
        model_name='steps_swin_small',
        model_kwargs=dict(strict_img_size=False, always_partition=True),
        out_indices=(0, 1, 2, 3),
        drop_path_rate=0.2,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained),
    ),
    neck=dict(in_channels=[96, 192, 384, 544]),
)
