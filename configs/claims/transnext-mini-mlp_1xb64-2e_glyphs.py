# TransNeXt at reduced scale (results/tables/claims/transnext.yaml): the aggregated arm's model with a plain MLP
# channel mixer (fc1-GELU-fc2 at the full width C*4, the GLUs' parameter count by the 2/3 rule of Sec. 3.2). Table
# 2 has no plain-MLP row (its step 3 is PVTv2's ConvFFN). Same data, epochs and recipe.
_base_ = ['./transnext-mini-aggregated_1xb64-2e_glyphs.py']
model = dict(ffn='mlp')
