# UperNet on the embedded ADE20K-format shapes set with Steps-ResNet-18 at half width (stage widths 32/64/128/256,
# the StepsNet steps of Table 12 halved) and 64-channel heads, so that it trains on 2 CPU cores in minutes
# (README "Fine-tuning"). Random backbone by default; to fine-tune a `depthbench train` checkpoint of the same
# model (a run directory or its best.pth/last.pth), add  model.backbone.init_cfg.checkpoint=results/runs/<exp>/<run>
_base_ = [
    'mmseg::_base_/models/upernet_r50.py',
    '../_base_/datasets/embedded_ade.py',
    'mmseg::_base_/default_runtime.py',
]
custom_imports = dict(imports=['downstream'], allow_failed_imports=False)
runner_type = 'DepthbenchRunner'
scale = 'embedded ade-shapes 128px, 500 iterations'  # meta.json: a reduced-scale run (results label it)

norm_cfg = dict(type='BN', requires_grad=True)  # SyncBN needs CUDA
num_classes = 5
# background, ellipse, triangle, rectangle, star: background (~80% of the pixels) down-weighted so the shapes'
# classes are learnt within 500 iterations, not only shape-vs-background
class_weight = [0.25, 0.85, 1.2, 1.0, 1.15]
model = dict(
    data_preprocessor=dict(size=(128, 128)),  # the crop size of the embedded set
    pretrained=None,
    backbone=dict(
        _delete_=True,
        type='DepthbenchBackbone',
        model_name='steps_resnet18_w32',  # half width: each stage's widest step is its width (models/)
        out_indices=(1, 2, 3, 4),  # timm: 0 is the stem
        init_cfg=dict(type='Pretrained', checkpoint=None),
    ),  # random init; see the header
    decode_head=dict(
        in_channels=[32, 64, 128, 256],
        channels=64,
        num_classes=num_classes,
        norm_cfg=norm_cfg,
        loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0, class_weight=class_weight),
    ),
    auxiliary_head=dict(in_channels=128, channels=32, num_classes=num_classes, norm_cfg=norm_cfg),
)

# Training crops are never padded (RandomResize from 1.0x up, then a 128 crop of the >=128 image): mmseg 1.2's
# cross-entropy indexes class_weight by label, which fails on the 255 of padded pixels. No PhotoMetricDistortion:
# colour is what tells the shapes' textures apart (brick/grass/gravel/coins).
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomResize', scale=(256, 128), ratio_range=(1.0, 1.5), keep_ratio=True),
    dict(type='RandomCrop', crop_size=(128, 128), cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))

max_iters = 500
val_interval = 250
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=val_interval)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
optim_wrapper = dict(
    type='OptimWrapper', optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.05), clip_grad=dict(max_norm=10.0)
)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=50),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=False, begin=50, end=max_iters),
]
default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=25, log_metric_by_epoch=False),
    param_scheduler=dict(type='ParamSchedulerHook'),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=val_interval, max_keep_ckpts=2),
    sampler_seed=dict(type='DistSamplerSeedHook'),
    visualization=dict(type='SegVisualizationHook', draw=False),
)
custom_hooks = [dict(type='RunDirHook')]
env_cfg = dict(cudnn_benchmark=False, dist_cfg=dict(backend='gloo'))
randomness = dict(seed=0)  # MMEngine draws a new seed per run otherwise
