# HO-ResNet Table 3 at reduced scale (results/tables/claims/horesnet.yaml): HO-ResNet-10 with the euler scheme at
# width 16 on the glyphs at 16x16, 4 epochs, AdamW at lr 5e-3 (tuned on Euler, the baseline). Every scheme at a
# depth has the same sub-blocks, parameters and FLOPs (audited).
_base_ = ['./_base_/glyphs.py', './_base_/adamw_cosine.py']
model = dict(name='horesnet10_euler', width=16)
data = dict(input_size=16)
optim = dict(lr=5e-3)
epochs = 4
