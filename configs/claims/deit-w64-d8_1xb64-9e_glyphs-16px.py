# StepsNet's depth claim at reduced scale (results/tables/claims/stepsnet.yaml, the deeper pair): the DeiT of
# deit-w64-d4_1xb64-9e_glyphs-16px.py at twice the depth (8 blocks, width 64: fixed width, as Table 5a), same data,
# epochs and recipe (not re-tuned: the 4-block recipe, docs/claims.md).
# Twin: steps-deit-w64-d16_1xb64-9e_glyphs-16px.py.
_base_ = ['./deit-w64-d4_1xb64-9e_glyphs-16px.py']
model = dict(depth=8)
