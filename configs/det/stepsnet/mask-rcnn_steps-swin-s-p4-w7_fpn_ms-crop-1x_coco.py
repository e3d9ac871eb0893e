# StepsNet Table 2a, Steps-Swin-S row (stage 4 544 wide); as the Steps-Swin-T config.
_base_ = ['./mask-rcnn_steps-swin-t-p4-w7_fpn_ms-crop-1x_coco.py']
pretrained = 'checkpoints/steps_swin_small_in1k.pth'
model = dict(
    backbone=dict(
        model_name='steps_swin_small', drop_path_rate=0.2, init_cfg=dict(type='Pretrained', checkpoint=pretrained)
    )
)
