# ScaleNet Table VII at reduced scale: the 4-block DeiT of deit-w64-d4_1xb64-4e_glyphs-16px.py expanded 2x in depth
# by weight sharing (order 'interpolate') with rank-8 parallel adapters -- 8 block applications, 4 blocks' weights
# plus adapters -- trained 3 epochs. Both arms of the claim use this file: the ScaleNet arm with
# model.pretrained = the shallow run's best.pth (set by `depthbench claims`, same seed), the scratch arm as is
# (the same expanded model from a random initialisation). Same data, epochs and recipe.
_base_ = ['./deit-w64-d4_1xb64-9e_glyphs-16px.py']
model = dict(pretrained=None, grow=dict(k=2, order='interpolate', adjust='adapter', rank=8))
epochs = 3
