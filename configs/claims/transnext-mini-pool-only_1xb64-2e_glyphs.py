# TransNeXt Table 2 at reduced scale (results/tables/claims/transnext.yaml): the aggregated arm's model and recipe
# with the 3x3 window of stage 1 shrunk to the query itself (window 1x1): each query attends to itself and the 4x4
# pooled map -- PVT's spatial-reduction attention plus the query's own token.
_base_ = ['./transnext-mini-aggregated_1xb64-2e_glyphs.py']
model = dict(window_size=(1, 3, 3, None))
