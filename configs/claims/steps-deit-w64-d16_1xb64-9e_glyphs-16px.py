# StepsNet's depth claim at reduced scale (the deeper pair): steps-deit-w64-d8_1xb64-9e_glyphs-16px.py's steps with
# twice the blocks in each -- [32,1]x8, [45,1]x4, [64,2]x4: 16 blocks with the parameters and FLOPs of the 8-block
# DeiT deit-w64-d8_1xb64-9e_glyphs-16px.py (audited). Same data, epochs and recipe.
_base_ = ['./steps-deit-w64-d8_1xb64-9e_glyphs-16px.py']
model = dict(steps=((32, 1, 8), (45, 1, 4), (64, 2, 4)))
