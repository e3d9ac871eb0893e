# ScaleNet Table VII at reduced scale (results/tables/claims/scalenet.yaml): the shallow model that the expanded arm
# starts from -- the DeiT of deit-w64-d4_1xb64-9e_glyphs-16px.py (4 blocks, width 64, glyphs at 16x16) trained
# 4 epochs. Its steps are not counted in the comparison, as the paper leaves the original 12-layer pretraining
# out of Table VII.
_base_ = ['./deit-w64-d4_1xb64-9e_glyphs-16px.py']
epochs = 4
