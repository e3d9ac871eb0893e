# HO-ResNet Table 3 at reduced scale (results/tables/claims/horesnet.yaml): the 10-layer Euler baseline's recipe with
# its sub-blocks wired as rk4 steps -- the same sub-blocks, parameters and FLOPs (audited), only the scheme differs.
_base_ = ['./horesnet10-euler-w16_1xb64-4e_glyphs-16px.py']
model = dict(name='horesnet10_rk4')
