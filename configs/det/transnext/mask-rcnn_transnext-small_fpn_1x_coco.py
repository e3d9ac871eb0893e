# TransNeXt Table 12, TransNeXt-Small: as the Tiny config; drop path 0.5 (paper; official config 0.6).
_base_ = ['./mask-rcnn_transnext-tiny_fpn_1x_coco.py']
pretrained = 'checkpoints/transnext_small_224_1k.pth'
model = dict(
    backbone=dict(
        model_name='transnext_small', drop_path_rate=0.5, init_cfg=dict(type='Pretrained', checkpoint=pretrained)
    )
)
