# ScaleNet through the WSPT hook: the same 2x DeiT-S expansion applied by models.scalenet.GrowthSchedule at the
# start of epoch 0 (the engine calls maybe_grow before every epoch and rebuilds the optimizer when the model
# changes; add stages=[dict(epoch=..., k=...), ...] for progressive growth). Accelerate engine only.
_base_ = ['./scalenet-deit-small-2x_8xb64-100e_in1k.py']
model = dict(expand=None, grow=dict(stages=[dict(epoch=0, method='scalenet', k=2, order='interpolate',
                                                 adjust='adapter', rank=16)]))
