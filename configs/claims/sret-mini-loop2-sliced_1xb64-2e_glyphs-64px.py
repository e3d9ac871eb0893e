# SReT Table 4 at reduced scale (results/tables/claims/sret.yaml): the recursive model with sliced group
# self-attention, the paper's final design [8,2][4,1][1,1] (loop 1: 8 groups of 8 tokens in stage 1) -- the same
# parameters, fewer FLOPs (audited).
_base_ = ['./sret-mini-loop2_1xb64-2e_glyphs-64px.py']
model = dict(groups=((8, 2), (4, 1), (1, 1)))
