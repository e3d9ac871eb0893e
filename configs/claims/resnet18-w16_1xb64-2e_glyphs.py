# StepsNet Table 1 at reduced scale (results/tables/claims/stepsnet.yaml): timm's ResNet-18 at a quarter width
# (stage widths 16/32/64/128) on the glyphs at 32x32, 2 epochs. Its twin steps-resnet18-w16_1xb64-2e_glyphs.py has
# the same parameters (-0.4 %) and FLOPs (-0.2 %), audited with harness/measure/flops.py before training.
_base_ = ['./_base_/glyphs.py', './_base_/adamw_cosine.py']
model = dict(name='resnet18', channels=(16, 32, 64, 128), drop_path_rate=0.0)
epochs = 2
