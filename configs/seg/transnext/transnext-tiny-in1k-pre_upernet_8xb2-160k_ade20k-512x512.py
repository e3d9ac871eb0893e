# TransNeXt Table 14, TransNeXt-Tiny, single-scale mIoU: UperNet 160k on ADE20K (TransNeXt paper §C.3 and the
# official config). mmseg's Swin UperNet recipe (UPerHead 512 channels, pool scales 1-2-3-6, auxiliary FCN on
# stage 3 with weight 0.4, SyncBN, crop 512, resize (2048, 512) x 0.5-2.0, cat_max_ratio 0.75, flip,
# photometric distortion, poly LR (power 1) after a 1500-iteration warm-up (ratio 1e-6), batch 16) with
# AdamW 6e-5, weight decay 0.05, none on norms and TransNeXt's query embedding / local position bias / log-CPB
# / temperature. Test: sliding 512x512 windows with stride 341.
# Backbone: img_size=512, pretrain_size=224, position bias interpolated; drop path 0.4 (paper = official).
# Multi-scale + flip test: the *_tta-interpolate.py / *_tta-extrapolate.py configs (Table 14's "+MS" column).
_base_ = ['mmseg::swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py']
custom_imports = dict(imports=['downstream'], allow_failed_imports=False)
pretrained = 'checkpoints/transnext_tiny_224_1k.pth'
model = dict(
    backbone=dict(
        _delete_=True,
        type='DepthbenchBackbone',
        model_name='transnext_tiny',
        model_kwargs=dict(img_size=512, pretrain_size=224, position_bias='interpolate'),
        out_indices=(0, 1, 2, 3),
        drop_path_rate=0.4,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained),
    ),
    decode_head=dict(in_channels=[72, 144, 288, 576], num_classes=150),
    auxiliary_head=dict(in_channels=288, num_classes=150),
    test_cfg=dict(mode='slide', crop_size=(512, 512), stride=(341, 341)),
)

optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=0.00006, betas=(0.9, 0.999), weight_decay=0.05),
    paramwise_cfg=dict(
        custom_keys={
            'query_embedding': dict(decay_mult=0.0),
            'relative_pos_bias_local': dict(decay_mult=0.0),
            'cpb': dict(decay_mult=0.0),
            'temperature': dict(decay_mult=0.0),
            'norm': dict(decay_mult=0.0),
        }
    ),
)
