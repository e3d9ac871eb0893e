# ScaleNet Table VII at reduced scale: the 4-block DeiT of deit-w64-d4_1xb64-4e_glyphs-16px.py expanded 2x in depth
# by weight sharing (order 'interpolate') with rank-8 parallel adapters -- 8 block applications, 4 blocks' weights
# plus adapters -- trained 3 epochs. Both arms of the claim use this file: the ScaleNet arm with
# model.pretrained = the shallow run's last.pth (set by `depthbench claims`, same seed), the scratch arm as is
# (the same expanded model from a random initialisation). Same data, epochs and recipe.
_base_ = ['./_base_/glyphs.py', './_base_/adamw_cosine.py']
model = dict(name='deit_tiny_patch16_224', img_size=16, patch_size=4, embed_dim=64, num_heads=2, depth=4,
             drop_path_rate=0.0, pretrained=None, grow=dict(k=2, order='interpolate', adjust='adapter', rank=8))
data = dict(input_size=16)
optim = dict(lr=1e-3)
epochs = 3
