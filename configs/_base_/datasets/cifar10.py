# CIFAR-10 in its standard python-pickle layout (data_batch_1..5, test_batch in <root> or
# <root>/cifar-10-batches-py); HO-ResNet's augmentation: RandomCrop(32, padding 4) + flip + AutoAugment (CIFAR-10
# policy, torchvision's; timm's policies are ImageNet ones), normalised with CIFAR-10 statistics; test = normalise.
data = dict(
    type='cifar10',
    root='data/cifar10',
    train_split='train',
    val_split='test',
    num_classes=10,
    input_size=32,
    interpolation='bilinear',
    crop_pct=1.0,
    crop_mode='center',
    mean=(0.4914, 0.4822, 0.4465),
    std=(0.2470, 0.2435, 0.2616),
    workers=4,
    pin_memory=True,
    eval_batch_size=None,
    repeated_aug=False,
    num_repeats=3,
    train_subset=None,
    val_subset=None,
    skip_bad_images=False,  # image folders: an image that does not decode is an error naming it; True: skipped,
    # each skip one warning line naming the file
)
aug = dict(
    pipeline='cifar',
    auto_augment='cifar10',
    color_jitter=0.0,
    reprob=0.0,
    remode='pixel',
    recount=1,
    scale=(0.08, 1.0),
    ratio=(3.0 / 4.0, 4.0 / 3.0),
    hflip=0.5,
    crop_padding=4,
    mixup=0.0,
    cutmix=0.0,
    cutmix_minmax=None,
    mixup_prob=1.0,
    mixup_switch_prob=0.5,
    mixup_mode='batch',
    smoothing=0.0,
)
