# make demo (harness/commands/demo.py), HO-ResNet Table 3's question at reduced scale: HO-ResNet-10 with the euler scheme,
# 32 channels, on the bundled digits at 16x16, the CIFAR recipe shortened to 8 epochs (decay at 5 and 7).
_base_ = ['../horesnet/horesnet10-rk4_1xb64-20e_digits.py']
model = dict(name='horesnet10_euler', width=32)
epochs = 8
sched = dict(decay_milestones=[5, 7])
