# StepsNet Table 2a, Swin-S row: mmdet's Swin-S (depths 2-2-18-2), same recipe as the Swin-T config.
_base_ = ['./mask-rcnn_swin-t-p4-w7_fpn_ms-crop-1x_coco.py']
pretrained = 'https://github.com/SwinTransformer/storage/releases/download/v1.0.0/swin_small_patch4_window7_224.pth'  # noqa
model = dict(
    backbone=dict(depths=[2, 2, 18, 2], drop_path_rate=0.2, init_cfg=dict(type='Pretrained', checkpoint=pretrained))
)
