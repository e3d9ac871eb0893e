# StepsNet Table 1 at reduced scale: a DeiT of 4 blocks at width 64 (2 heads), patch 4, on the clean glyphs at
# 16x16 (16 tokens; printed characters without neighbours, backgrounds or noise), 9 epochs at lr 1e-3. Plain ViTs
# are the slowest family here (a linear patch embedding must learn every background and both ink polarities;
# docs/claims.md): on the cluttered glyphs this DeiT ends 9 epochs at 29 % top-1, on the clean ones it learns.
# Twin: steps-deit-w64-d8_1xb64-9e_glyphs-16px.py (params +0.3 %, FLOPs +1.7 %, audited). ScaleNet's arms inherit it.
_base_ = ['./_base_/glyphs.py', './_base_/adamw_cosine.py']
model = dict(
    name='deit_tiny_patch16_224', img_size=16, patch_size=4, embed_dim=64, num_heads=2, depth=4, drop_path_rate=0.0
)
data = dict(input_size=16, variant='clean')  # printed characters alone: the cluttered set keeps plain ViTs at chance
optim = dict(lr=1e-3)
sched = dict(warmup_epochs=1)  # a 0.1-epoch warm-up left one seed at chance for all 9 epochs
epochs = 9
