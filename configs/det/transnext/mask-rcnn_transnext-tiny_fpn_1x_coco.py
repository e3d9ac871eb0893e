# TransNeXt Table 12, TransNeXt-Tiny: Mask R-CNN 1x (TransNeXt paper §C.3, following Swin's settings).
# Single-scale 1333x800 training with flip (mmdet's Swin 1x config), 12 epochs, batch 16 (8 GPUs x 2), LR x0.1
# at epochs 8 and 11 after a 500-iteration linear warm-up (ratio 0.001); AdamW 1e-4, weight decay 0.05, none on
# norms and TransNeXt's query embedding, local position bias, log-CPB and temperature (official config).
# Backbone: position bias generated at 800 and interpolated to each image (img_size=800, pretrain_size=224,
# position_bias='interpolate' = the official is_extrapolation=False). Drop path: 0.3 as the paper prints; the
# official config uses 0.4 (model.backbone.drop_path_rate=0.4).
# Pretrained: the official ImageNet-1K checkpoint (transnext_tiny_224_1k.pth) or a depthbench run of
# configs/transnext/transnext-tiny_8xb128-300e_in1k.py: model.backbone.init_cfg.checkpoint=<file or run dir>.
_base_ = ['mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_1x_coco.py']
custom_imports = dict(imports=['downstream'], allow_failed_imports=False)
pretrained = 'checkpoints/transnext_tiny_224_1k.pth'
model = dict(
    backbone=dict(
        _delete_=True,
        type='DepthbenchBackbone',
        model_name='transnext_tiny',
        model_kwargs=dict(img_size=800, pretrain_size=224, position_bias='interpolate'),
        out_indices=(0, 1, 2, 3),
        drop_path_rate=0.3,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained),
    ),
    neck=dict(in_channels=[72, 144, 288, 576]),
)

param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=500),
    dict(type='MultiStepLR', begin=0, end=12, by_epoch=True, milestones=[8, 11], gamma=0.1),
]
optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=0.0001, betas=(0.9, 0.999), weight_decay=0.05),
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
