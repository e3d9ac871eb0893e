# HO-ResNet-58, Verner-RK8(fixed)×2, on CIFAR-10 (paper Tables 3-4, §3.1): SGD lr 0.1 (x0.1 at epochs
# 100/150/200/230), momentum 0.9, wd 1e-4, batch 128, 260 epochs, AutoAugment (CIFAR-10 policy). Other depths/schemes
# of Table 3: model.name=horesnet<L>_<scheme> (`depthbench models 'horesnet*'`). Table 4's time-to-80/85% train
# accuracy comes from the "epoch" records (train_top1, train_time_s) in metrics.jsonl.
_base_ = ['../_base_/datasets/cifar10.py', '../_base_/schedules/sgd_multistep_260e.py']
model = dict(name='horesnet58_verner')
log_interval = 50
