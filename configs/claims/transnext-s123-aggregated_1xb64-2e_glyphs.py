# TransNeXt Tables 2 and 9 at reduced scale (results/tables/claims/transnext.yaml): aggregated attention in stages
# 1-3 as in TransNeXt-Micro, at a size where it differs from full attention: glyphs at 32x32 with patch 2, so the
# stages are 16x16, 8x8, 4x4 and 2x2 tokens; pools 4x4, 4x4 and 2x2 (sr_ratios 4/2/2) with a 3x3 window; stage 4
# full attention. Widths 32/64/128/256, one block per stage (the 16x16 stage costs 4x
# the patch-4 arm's compute: the budget), 2 epochs, AdamW lr 1e-3 (the 32x32 patch-4 arm's recipe,
# not re-tuned). The ablation arms inherit this file and change only the token mixer.
_base_ = ['./transnext-mini-aggregated_1xb64-2e_glyphs.py']
model = dict(patch_size=2, depths=(1, 1, 1, 1), sr_ratios=(4, 2, 2, 1), window_size=(3, 3, 3, None))
