# StepsNet Table 1 at reduced scale: Steps-ResNet-18 at a quarter width -- Table 12's steps for stages 3-4 scaled
# to stage widths 64/128 (steps_resnet18_w32's halved again, widths rounded down): 18 blocks where ResNet-18 has 8,
# the parameters and FLOPs of resnet18-w16_1xb64-2e_glyphs.py. Same data, epochs and recipe.
_base_ = ['./_base_/glyphs.py', './_base_/adamw_cosine.py']
model = dict(
    name='steps_resnet18',
    channels=(16, 32, 64, 128),
    drop_path_rate=0.0,
    stage_steps=(
        None,
        None,
        ((16, 2), (22, 1), (32, 1), (45, 1), (64, 0)),
        ((16, 2), (22, 1), (32, 1), (45, 1), (64, 1), (90, 1), (128, 0)),
    ),
)
epochs = 2
