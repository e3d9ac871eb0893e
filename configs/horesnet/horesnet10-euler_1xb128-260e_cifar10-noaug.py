# HO-ResNet-10 (euler) on CIFAR-10 "raw data" (paper Figs. 10-11, §3.2/§3.4): the §3.1 schedule without any
# augmentation; compare train/test accuracy and loss per epoch (the "epoch" and "eval" records).
_base_ = ['../_base_/datasets/cifar10.py', '../_base_/schedules/sgd_multistep_260e.py']
model = dict(name='horesnet10_euler')
aug = dict(pipeline='none', auto_augment=None)
log_interval = 50
