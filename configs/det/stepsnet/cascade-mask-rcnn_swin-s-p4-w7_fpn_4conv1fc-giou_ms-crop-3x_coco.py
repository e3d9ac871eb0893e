# StepsNet Table 2b, Swin-S row: the Swin-T recipe with Swin-S (depths 2-2-18-2, drop path 0.2).
_base_ = ['./cascade-mask-rcnn_swin-t-p4-w7_fpn_4conv1fc-giou_ms-crop-3x_coco.py']
pretrained = 'https://github.com/SwinTransformer/storage/releases/download/v1.0.0/swin_small_patch4_window7_224.pth'  # noqa
model = dict(
    backbone=dict(depths=[2, 2, 18, 2], drop_path_rate=0.2, init_cfg=dict(type='Pretrained', checkpoint=pretrained))
)
