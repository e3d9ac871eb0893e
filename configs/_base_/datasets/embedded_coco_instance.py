# The embedded COCO-format instance-segmentation set (downstream/embedded.py: shapes of 4 classes on scikit-image
# photographs, 128x128, 400 train / 100 val images), generated into ~/.cache/depthbench/data on first use.
# The layout is COCO's, so `data_root=data/coco/` (with the COCO classes and a full-size pipeline) or any
# COCO-format folder works too: `depthbench finetune` moves every path under data_root with it.
_base_ = ['mmdet::_base_/datasets/coco_instance.py']

data_root = 'embedded://coco-shapes/'
metainfo = dict(classes=('ellipse', 'triangle', 'rectangle', 'star'))
image_size = (128, 128)

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='Resize', scale=image_size, keep_ratio=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=image_size, keep_ratio=True),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor')),
]
tta_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='TestTimeAug',
        transforms=[
            [dict(type='Resize', scale=image_size, keep_ratio=True)],
            [dict(type='RandomFlip', prob=1.0), dict(type='RandomFlip', prob=0.0)],
            [dict(type='LoadAnnotations', with_bbox=True, with_mask=True)],
            [
                dict(
                    type='PackDetInputs',
                    meta_keys=(
                        'img_id',
                        'img_path',
                        'ori_shape',
                        'img_shape',
                        'scale_factor',
                        'flip',
                        'flip_direction',
                    ),
                )
            ],
        ],
    ),
]
tta_model = dict(type='DetTTAModel', tta_cfg=dict(nms=dict(type='nms', iou_threshold=0.5), max_per_img=100))

# CPU-sized loading: the images are tiny, worker processes would only compete for the cores
train_dataloader = dict(
    batch_size=4,
    num_workers=0,
    persistent_workers=False,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(
        data_root=data_root,
        metainfo=metainfo,
        pipeline=train_pipeline,
        filter_cfg=dict(filter_empty_gt=True, min_size=8),
    ),
)
val_dataloader = dict(
    batch_size=4,
    num_workers=0,
    persistent_workers=False,
    dataset=dict(data_root=data_root, metainfo=metainfo, pipeline=test_pipeline),
)
test_dataloader = val_dataloader
val_evaluator = dict(ann_file=data_root + 'annotations/instances_val2017.json')
test_evaluator = val_evaluator
