# TransNeXt Table 14 "+MS" (second number, extrapolation): as the interpolation TTA config, with log-CPB
# evaluated on each input's own coordinates (official `*_ms_extrapolation` config, is_extrapolation=True).
_base_ = ['./transnext-tiny-in1k-pre_upernet_8xb2-160k_ade20k-512x512_tta-interpolate.py']
model = dict(backbone=dict(model_kwargs=dict(img_size=512, position_bias='extrapolate')))
