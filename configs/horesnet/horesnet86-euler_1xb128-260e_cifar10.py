# HO-ResNet-86 Euler x42 on CIFAR-10 with the §4.1 recipe in fp32 (the base of the learning-rate sweep).
_base_ = ['../_base_/datasets/cifar10.py', '../_base_/schedules/sgd_multistep_260e.py']
model = dict(name='horesnet86_euler')
precision = 'fp32'
log_interval = 50
