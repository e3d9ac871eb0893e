# TransNeXt at reduced scale (results/tables/claims/transnext.yaml): the aggregated arm's model and recipe with the
# pooled map of stage 1 shrunk to one global token: each query attends to its 3x3 window and one average.
_base_ = ['./transnext-mini-aggregated_1xb64-2e_glyphs.py']
model = dict(pool_mode='linear', fixed_pool_size=1)
