# TransNeXt Table 14 "+MS" (interpolate), TransNeXt-Small: the Small model tested as the Tiny *_tta-interpolate.py config.
_base_ = ['./transnext-tiny-in1k-pre_upernet_8xb2-160k_ade20k-512x512_tta-interpolate.py']
pretrained = 'checkpoints/transnext_small_224_1k.pth'
model = dict(
    backbone=dict(
        model_name='transnext_small',
        drop_path_rate=0.6,
        model_kwargs=dict(img_size=800, position_bias='interpolate'),
        init_cfg=dict(type='Pretrained', checkpoint=pretrained),
    ),
    decode_head=dict(in_channels=[72, 144, 288, 576]),
    auxiliary_head=dict(in_channels=288),
)
