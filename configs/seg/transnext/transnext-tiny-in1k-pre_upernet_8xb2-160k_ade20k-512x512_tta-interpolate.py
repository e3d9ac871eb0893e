# TransNeXt Table 14 "+MS" (first number, interpolation): test the single-scale model (same weights) with
# multi-scale + flip, whole-image inference, and the position bias generated at img_size=800 and interpolated
# (official `*_ms` config, is_extrapolation=False). `depthbench test CONFIG CHECKPOINT --tta` (mmseg's TTA).
# Scales are the official mmseg-0.x aug-test ones: ratios 0.5-1.75 of (2048, 512) — not mmseg 1.x's default
# tta_pipeline, which scales the original image instead.
_base_ = ['./transnext-tiny-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py']
model = dict(
    backbone=dict(model_kwargs=dict(img_size=800, position_bias='interpolate')),
    test_cfg=dict(_delete_=True, mode='whole'),
)
img_ratios = [0.5, 0.75, 1.0, 1.25, 1.5, 1.75]
tta_pipeline = [
    dict(type='LoadImageFromFile', backend_args=None),
    dict(
        type='TestTimeAug',
        transforms=[
            [dict(type='Resize', scale=(int(2048 * r), int(512 * r)), keep_ratio=True) for r in img_ratios],
            [
                dict(type='RandomFlip', prob=0.0, direction='horizontal'),
                dict(type='RandomFlip', prob=1.0, direction='horizontal'),
            ],
            [dict(type='LoadAnnotations')],
            [dict(type='PackSegInputs')],
        ],
    ),
]
