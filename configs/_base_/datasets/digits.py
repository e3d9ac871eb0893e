# The embedded default: scikit-learn's bundled handwritten digits (1,797 real 8x8 images, 10 classes), exported
# once to ~/.cache/depthbench/data/digits-<input_size>/{train,val}/<class>/*.png (RGB, fixed stratified 80/20
# split: 1,437 train / 360 val). No download; runs on any machine. $DEPTHBENCH_DATA moves the cache;
# the data is generated, so data.root is not read (an override of it is refused: it would change nothing).
_base_ = ['./cifar10.py']
data = dict(
    type='digits',
    root=None,
    train_split='train',
    val_split='val',
    input_size=32,
    mean=(0.5, 0.5, 0.5),
    std=(0.5, 0.5, 0.5),
    workers=0,
)
aug = dict(pipeline='cifar', auto_augment=None, hflip=0.0, crop_padding=2)  # no flips: a mirrored 2 is no 2
