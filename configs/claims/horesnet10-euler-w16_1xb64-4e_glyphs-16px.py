# HO-ResNet Table 3 at reduced scale (results/tables/claims/horesnet.yaml): HO-ResNet-10 with the euler scheme at
# width 16 on the glyphs at 16x16, 4 epochs, AdamW at lr 2e-2 after a 1-epoch warm-up, tuned on the 10-layer Euler
# baseline (with a 0.1-epoch warm-up: 5e-3 51 %, 1e-2 34 %, 2e-2 73 % for one seed and chance for another; the
# 1-epoch warm-up at 2e-2: 79 % for that seed). Every scheme at a depth has the same sub-blocks, parameters and
# FLOPs (audited). No ReLU after a block, as at 18 layers (horesnet18-euler-w16_1xb64-5e_glyphs-16px.py: fixed
# 29 Nov before evaluation seeds 300+; the lr was tuned with the block ReLU and not retuned).
_base_ = ['./_base_/glyphs.py', './_base_/adamw_cosine.py']
model = dict(name='horesnet10_euler', width=16, post_block_relu=False)
data = dict(input_size=16)
optim = dict(lr=2e-2)
sched = dict(warmup_epochs=1)
epochs = 4
