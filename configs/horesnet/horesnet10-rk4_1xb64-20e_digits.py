# Embedded preset: HO-ResNet-10 with one RK4 block, 32 channels, on the bundled digits at 16x16 -- the HO-ResNet
# CIFAR recipe (SGD 0.1, momentum 0.9, wd 1e-4, step decay x0.1) shortened to 20 epochs (decay at 10 and 15).
# Runs on any machine with no download: `depthbench train configs/horesnet/horesnet10-rk4_1xb64-20e_digits.py`.
_base_ = ['../_base_/datasets/digits.py', '../_base_/schedules/sgd_multistep_260e.py']
model = dict(name='horesnet10_rk4', width=32)
epochs = 20
batch_size = 64
sched = dict(decay_milestones=[10, 15])
data = dict(input_size=16)
aug = dict(crop_padding=2)
log_interval = 5
