# HO-ResNet's control at reduced scale (results/tables/claims/horesnet.yaml): the 18-layer RK-4 network whose
# output is k4 alone (rk4_output='k4_only': the same four stages and sub-blocks, parameters and FLOPs, but no blend
# of k1..k4), so RK-4 against it separates "a higher-order update" from "smaller steps inside the block".
_base_ = ['./horesnet18-rk4-w16_1xb64-5e_glyphs-16px.py']
model = dict(rk4_output='k4_only')
