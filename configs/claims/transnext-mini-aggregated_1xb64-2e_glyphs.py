# TransNeXt Table 2 at reduced scale (results/tables/claims/transnext.yaml): TransNeXt at a quarter of Micro's widths
# (32/64/128/256, depths 2/2/2/1, patch 4) on the glyphs at 32x32 -- stage 1 is 8x8 tokens with pooling ratio 2, the
# later stages full attention -- with aggregated attention in stage 1 (each query: its 3x3 window and the 4x4
# pooled map, one softmax). 2 epochs, AdamW lr 1e-3 (tuned on this arm). The ablation arms inherit this file and
# change only the token mixer.
_base_ = ['./_base_/glyphs.py', './_base_/adamw_cosine.py']
model = dict(
    name='transnext_micro',
    img_size=32,
    patch_size=4,
    embed_dims=(32, 64, 128, 256),
    num_heads=(1, 2, 4, 8),
    depths=(2, 2, 2, 1),
    sr_ratios=(2, 1, 1, 1),
    mlp_ratios=(4, 4, 4, 4),
    window_size=(3, 3, 3, None),
    drop_path_rate=0.0,
)
optim = dict(lr=1e-3)
epochs = 2
