# StepsNet Table 1 at reduced scale: Steps-DeiT-T's steps (Table 13: [96,2]x12, [136,2]x6, [192,3]x6) at a third of
# the width and depth: [32,1]x4, [45,1]x2, [64,2]x2 -- 8 blocks with the parameters and FLOPs of
# deit-w64-d4_1xb64-9e_glyphs-16px.py's 4 blocks. Same data, epochs and recipe.
_base_ = ['./_base_/glyphs.py', './_base_/adamw_cosine.py']
model = dict(
    name='steps_deit_tiny', img_size=16, patch_size=4, drop_path_rate=0.0, steps=((32, 1, 4), (45, 1, 2), (64, 2, 2))
)
data = dict(input_size=16, variant='clean')  # printed characters alone: the cluttered set keeps plain ViTs at chance
optim = dict(lr=1e-3)
sched = dict(warmup_epochs=1)  # a 0.1-epoch warm-up left one seed at chance for all 9 epochs
epochs = 9
