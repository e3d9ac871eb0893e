# Swin-B in the StepsNet Cascade 3x recipe (the paper's Table 2b OCR ends after Swin-S; kept for Steps-Swin-B's
# comparison): C=128, depths 2-2-18-2, heads 4-8-16-32, drop path 0.3.
_base_ = ['./cascade-mask-rcnn_swin-t-p4-w7_fpn_4conv1fc-giou_ms-crop-3x_coco.py']
pretrained = 'https://github.com/SwinTransformer/storage/releases/download/v1.0.0/swin_base_patch4_window7_224.pth'  # noqa
model = dict(
    backbone=dict(
        embed_dims=128,
        depths=[2, 2, 18, 2],
        num_heads=[4, 8, 16, 32],
        drop_path_rate=0.3,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained),
    ),
    neck=dict(in_channels=[128, 256, 512, 1024]),
)
