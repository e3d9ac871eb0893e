# make demo (harness/commands/demo.py): pretraining for the downstream fine-tune -- the half-width Steps-ResNet-18 of the
# embedded presets (configs/det|seg/*steps-resnet18-w32*: stage widths 32/64/128/256, Table 12's steps halved)
# as a digits classifier at 32x32; its best.pth initialises the backbone of
# mask-rcnn_steps-resnet18-w32-digits-pre_fpn_200it_embedded-coco.py (beside this file).
_base_ = ['../horesnet/horesnet10-rk4_1xb64-20e_digits.py']
model = dict(_delete_=True, name='steps_resnet18_w32')  # registered in models/stepsnet.py (the presets' backbone)
epochs = 8
sched = dict(decay_milestones=[5, 7])
data = dict(input_size=32)
