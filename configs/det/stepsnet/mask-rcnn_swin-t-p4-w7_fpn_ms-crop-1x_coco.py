# StepsNet Table 2a, Swin-T row: mmdet's own Swin-T in Mask R-CNN 1x with the Swin paper's detection recipe.
# The StepsNet paper gives only "standard Mask R-CNN training settings" (Appendix A); Swin-T's printed 43.7 AP
# is the Swin paper's 1x result, trained with multi-scale + crop augmentation, so that is the recipe here
# [ASSUMED]: the augmentation of mmdet's 3x config, 12 epochs, LR x0.1 at epochs 8 and 11, 500-iteration
# linear warm-up (ratio 0.001), AdamW 1e-4, weight decay 0.05 without decay on norms and position tables.
_base_ = ['mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_ms-crop-3x_coco.py']
custom_imports = dict(imports=['downstream'], allow_failed_imports=False)

max_epochs = 12
train_cfg = dict(max_epochs=max_epochs)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=500),
    dict(type='MultiStepLR', begin=0, end=max_epochs, by_epoch=True, milestones=[8, 11], gamma=0.1),
]
