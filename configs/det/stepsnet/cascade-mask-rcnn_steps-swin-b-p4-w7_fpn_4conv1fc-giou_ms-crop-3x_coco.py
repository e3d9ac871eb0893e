# StepsNet Table 2b, Steps-Swin-B row: the Swin Cascade Mask R-CNN 3x recipe with depthbench's
# `steps_swin_base` (stage 4 is 720 wide, StepsNet Table 14); see the Mask R-CNN config for the
# backbone arguments. Pretrained: model.backbone.init_cfg.checkpoint=<run directory or .pth>.
_base_ = ['./cascade-mask-rcnn_swin-t-p4-w7_fpn_4conv1fc-giou_ms-crop-3x_coco.py']
pretrained = 'checkpoints/steps_swin_base_in1k.pth'
model = dict(
    backbone=dict(
        _delete_=True,
        type='DepthbenchBackbone',
        model_name='steps_swin_base',
        model_kwargs=dict(strict_img_size=False, always_partition=True),
        out_indices=(0, 1, 2, 3),
        drop_path_rate=0.3,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained),
    ),
    neck=dict(in_channels=[128, 256, 512, 720]),
)
