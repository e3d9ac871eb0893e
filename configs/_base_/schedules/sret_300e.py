# SReT's ImageNet recipe (paper Table 6, "mainly follow DeiT"): DeiT's, at batch 512 with lr 5e-4
# (= 5e-4 x 512/512), warm-up 5 epochs, label smoothing 0.1, no EMA for the reported numbers.
_base_ = ['./deit_300e.py']
batch_size = 512
ema = dict(enable=False)
