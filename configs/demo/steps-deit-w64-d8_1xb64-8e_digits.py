# make demo (harness/commands/demo.py): Steps-DeiT-T's steps (Table 13: [96,2]x12, [136,2]x6, [192,3]x6, each step's width
# x1/sqrt2 of the next) at a third of the width and depth: [32,1]x4, [45,1]x2, [64,2]x2 -- 8 blocks with the
# parameters and FLOPs of deit-w64-d4_1xb64-8e_digits.py's 4 blocks at width 64 (audited by the demo).
_base_ = ['../deit/deit-tiny-p4_1xb64-30e_digits.py']
model = dict(
    _delete_=True,
    name='steps_deit_tiny',
    img_size=16,
    patch_size=4,
    drop_path_rate=0.0,
    steps=((32, 1, 4), (45, 1, 2), (64, 2, 2)),
)
epochs = 8
sched = dict(warmup_epochs=1)
