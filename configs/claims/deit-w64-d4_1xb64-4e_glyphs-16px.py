# ScaleNet Table VII at reduced scale (results/tables/claims/scalenet.yaml): the shallow model that the expanded arm
# starts from -- the DeiT of deit-w64-d4_1xb64-9e_glyphs-16px.py (4 blocks, width 64, glyphs at 16x16) trained
# 4 epochs. Its steps are not counted in the comparison, as the paper leaves the original 12-layer pretraining
# out of Table VII.
_base_ = ['./_base_/glyphs.py', './_base_/adamw_cosine.py']
model = dict(name='deit_tiny_patch16_224', img_size=16, patch_size=4, embed_dim=64, num_heads=2, depth=4,
             drop_path_rate=0.0)
data = dict(input_size=16)
optim = dict(lr=1e-3)
epochs = 4
