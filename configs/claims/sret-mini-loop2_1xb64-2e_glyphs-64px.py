# SReT Table 1 at reduced scale (results/tables/claims/sret.yaml): the loop-1 baseline's model and recipe with every
# block applied twice in a row with shared weights (recursion), global self-attention -- the same parameters.
_base_ = ['./sret-mini-loop1_1xb64-2e_glyphs-64px.py']
model = dict(loops=2)
