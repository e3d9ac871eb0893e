# TransNeXt Table 15, TransNeXt-Base: as the Tiny Mask2Former config, drop path 0.6 (paper = official).
_base_ = ['./transnext-tiny-in1k-pre_mask2former_8xb2-160k_ade20k-512x512.py']
pretrained = 'checkpoints/transnext_base_224_1k.pth'
model = dict(
    backbone=dict(
        model_name='transnext_base', drop_path_rate=0.6, init_cfg=dict(type='Pretrained', checkpoint=pretrained)
    ),
    decode_head=dict(in_channels=[96, 192, 384, 768]),
)
