# ImageNet-1K in the ImageFolder layout (<root>/train/<class>/*.JPEG, <root>/val/<class>/*.JPEG) with the DeiT
# augmentation recipe (timm create_transform + Mixup/CutMix + label smoothing + repeated augmentation).
data = dict(
    type='folder',
    root='data/imagenet',
    train_split='train',
    val_split='val',
    num_classes=1000,
    input_size=224,
    interpolation='bicubic',
    crop_pct=0.875,  # eval: resize to input_size / crop_pct, centre crop
    crop_mode='center',  # 'squash' warps to input_size without cropping (TransNeXt at >= 384)
    mean=(0.485, 0.456, 0.406),
    std=(0.229, 0.224, 0.225),
    workers=10,
    pin_memory=True,
    eval_batch_size=None,  # per process; None: the training batch per process
    repeated_aug=True,  # DeiT's RASampler (timm RepeatAugSampler)
    num_repeats=3,
    train_subset=None,  # train on a fixed random subset of N images (smoke runs)
    val_subset=None,
    skip_bad_images=False,  # image folders: an image that does not decode is an error naming it; True: skipped,
    # each skip one warning line naming the file
)
aug = dict(
    pipeline='imagenet',  # 'imagenet' (timm create_transform), 'cifar' (crop+flip+AutoAugment CIFAR10), 'none'
    auto_augment='rand-m9-mstd0.5-inc1',
    color_jitter=0.4,
    reprob=0.25,
    remode='pixel',
    recount=1,
    scale=(0.08, 1.0),
    ratio=(3.0 / 4.0, 4.0 / 3.0),
    hflip=0.5,
    crop_padding=4,  # cifar pipeline only
    mixup=0.8,
    cutmix=1.0,
    cutmix_minmax=None,
    mixup_prob=1.0,
    mixup_switch_prob=0.5,
    mixup_mode='batch',
    smoothing=0.1,
)
