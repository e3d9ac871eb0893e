# The claims' data (docs/claims.md): the embedded glyphs dataset (harness/tasks/glyphs.py) -- 53 characters
# rendered from the typefaces of Debian's font packages with random affine, neighbours, backgrounds, ink and
# noise; 21,200 training images, 5,300 validation images from held-out typefaces; generated once, cached in
# ~/.cache/depthbench/data/glyphs-<input_size>/. No flips (a mirrored b is a d), a 2-pixel random crop.
_base_ = ['../../_base_/datasets/cifar10.py']
data = dict(
    type='glyphs',
    root=None,
    train_split='train',
    val_split='val',
    num_classes=53,
    input_size=32,
    mean=(0.5, 0.5, 0.5),
    std=(0.5, 0.5, 0.5),
    workers=0,
    variant='cluttered',  # or 'clean': printed characters alone (harness/tasks/glyphs.py VARIANTS; the DeiT claims)
)
aug = dict(pipeline='cifar', auto_augment=None, hflip=0.0, crop_padding=2)
