# SReT Tables 1-3 at reduced scale (results/tables/claims/sret.yaml): a 3-stage SReT with the conv stem, widths
# 32/64/128 (base dim 16, heads 2/4/8), one distinct block per stage, learnable residual coefficients on both
# branches, no NLL (so recursion adds no parameters: Table 1's question with Table 11's LRC), on the glyphs at
# 64x64 (stage 1 is 8x8 tokens), 2 epochs, AdamW lr 1e-3 (tuned on this arm): every block applied once (no
# recursion). The recursive arms inherit this file and change only the model.
_base_ = ['./_base_/glyphs.py', './_base_/adamw_cosine.py']
model = dict(
    name='SReT_T',
    img_size=64,
    base_dims=(16, 16, 16),
    heads=(2, 4, 8),
    num_blocks=(1, 1, 1),
    nll=False,
    lrc='both',
    drop_path_rate=0.0,
    loops=1,
    groups=((1,), (1,), (1,)),
)
data = dict(input_size=64)
optim = dict(lr=1e-3)
epochs = 2
