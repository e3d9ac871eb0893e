# StepsNet Table 2a, Steps-Swin-B row: C=128, stage 4 720 wide; drop path 0.3 as Swin-B.
_base_ = ['./mask-rcnn_steps-swin-t-p4-w7_fpn_ms-crop-1x_coco.py']
pretrained = 'checkpoints/steps_swin_base_in1k.pth'
model = dict(
    backbone=dict(
        model_name='steps_swin_base', drop_path_rate=0.3, init_cfg=dict(type='Pretrained', checkpoint=pretrained)
    ),
    neck=dict(in_channels=[128, 256, 512, 720]),
)
