# TransNeXt Table 2 at reduced scale (results/tables/claims/transnext.yaml): the aggregated arm's model with the
# plain GLU as channel mixer -- ConvGLU without the 3x3 depthwise conv on the gate (roadmap step 4, "ConvFFN->GLU";
# step 5, "GLU->ConvGLU", adds the conv back). Same data, epochs and recipe.
_base_ = ['./transnext-mini-aggregated_1xb64-2e_glyphs.py']
model = dict(ffn='glu')
