# The embedded ADE20K-format semantic-segmentation set (downstream/embedded.py: background + 4 shape classes on
# scikit-image photographs, 128x128, 400 train / 100 val images), generated into ~/.cache/depthbench/data on
# first use. ADE20K's folder layout and label convention (0 = unlabelled, reduce_zero_label=True); for the real
# ADE20K set data_root=data/ade/ADEChallengeData2016 with dataset type ADE20KDataset.
_base_ = ['mmseg::_base_/datasets/ade20k.py']

dataset_type = 'EmbeddedADE20KDataset'
data_root = 'embedded://ade-shapes/'
crop_size = (128, 128)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomResize', scale=(256, 128), ratio_range=(0.75, 1.5), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(256, 128), keep_ratio=True),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
tta_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='TestTimeAug',
        transforms=[
            [dict(type='Resize', scale_factor=r, keep_ratio=True) for r in (0.75, 1.0, 1.25)],
            [
                dict(type='RandomFlip', prob=0.0, direction='horizontal'),
                dict(type='RandomFlip', prob=1.0, direction='horizontal'),
            ],
            [dict(type='LoadAnnotations')],
            [dict(type='PackSegInputs')],
        ],
    ),
]
# CPU-sized loading: the images are tiny, worker processes would only compete for the cores
train_dataloader = dict(
    batch_size=8,
    num_workers=0,
    persistent_workers=False,
    dataset=dict(type=dataset_type, data_root=data_root, pipeline=train_pipeline),
)
val_dataloader = dict(
    batch_size=4,
    num_workers=0,
    persistent_workers=False,
    dataset=dict(type=dataset_type, data_root=data_root, pipeline=test_pipeline),
)
test_dataloader = val_dataloader
val_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
test_evaluator = val_evaluator
