# Mask R-CNN on the embedded COCO-format shapes set with Steps-ResNet-18 at half width (stage widths
# 32/64/128/256, the StepsNet steps of Table 12 halved), a 64-channel FPN and lighter heads, so that it trains
# on 2 CPU cores in minutes (README "Fine-tuning"). Random backbone by default; to fine-tune a `depthbench train`
# checkpoint of the same model (a run directory or its best.pth/last.pth), add
#   model.backbone.init_cfg.checkpoint=results/runs/<exp>/<run>
_base_ = [
    'mmdet::_base_/models/mask-rcnn_r50_fpn.py',
    '../_base_/datasets/embedded_coco_instance.py',
    'mmdet::_base_/default_runtime.py',
]
custom_imports = dict(imports=['downstream'], allow_failed_imports=False)
runner_type = 'DepthbenchRunner'
scale = 'embedded coco-shapes 128px, 500 iterations'  # meta.json: a reduced-scale run (results label it)

neck_channels = 64
num_classes = 4
model = dict(
    backbone=dict(
        _delete_=True,
        type='DepthbenchBackbone',
        model_name='steps_resnet18_w32',  # half width: each stage's widest step is its width (models/)
        out_indices=(1, 2, 3, 4),  # timm: 0 is the stem
        init_cfg=dict(type='Pretrained', checkpoint=None),
    ),  # random init; see the header
    neck=dict(in_channels=[32, 64, 128, 256], out_channels=neck_channels),
    rpn_head=dict(
        in_channels=neck_channels, feat_channels=neck_channels, anchor_generator=dict(scales=[4])
    ),  # 16-256 px anchors for objects of 20-64 px
    roi_head=dict(
        # torchvision's RoIAlign with one sample per bin: mmcv's CPU kernel (adaptive sampling) took a third
        # of every iteration here
        bbox_roi_extractor=dict(out_channels=neck_channels, roi_layer=dict(sampling_ratio=1, use_torchvision=True)),
        bbox_head=dict(in_channels=neck_channels, fc_out_channels=256, num_classes=num_classes),
        mask_roi_extractor=dict(out_channels=neck_channels, roi_layer=dict(sampling_ratio=1, use_torchvision=True)),
        mask_head=dict(
            num_convs=2, in_channels=neck_channels, conv_out_channels=neck_channels, num_classes=num_classes
        ),
    ),
    train_cfg=dict(rpn_proposal=dict(nms_pre=500, max_per_img=200), rcnn=dict(sampler=dict(num=64))),
    test_cfg=dict(rpn=dict(nms_pre=500, max_per_img=200)),
)

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
    logger=dict(type='LoggerHook', interval=25),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=val_interval, max_keep_ckpts=2),
    visualization=dict(draw=False),
)
log_processor = dict(by_epoch=False)
custom_hooks = [dict(type='RunDirHook')]
env_cfg = dict(cudnn_benchmark=False, dist_cfg=dict(backend='gloo'))
auto_scale_lr = dict(enable=False, base_batch_size=4)
randomness = dict(seed=0)  # MMEngine draws a new seed per run otherwise
