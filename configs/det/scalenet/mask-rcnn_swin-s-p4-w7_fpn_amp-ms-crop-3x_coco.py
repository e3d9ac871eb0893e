# ScaleNet Table VIII, Swin-Small baseline: mmdet's own Swin-S Mask R-CNN 3x (fp16, multi-scale + crop) config,
# whose released detector (48.2 box AP) is the ScaleNet paper's starting point.
_base_ = ['mmdet::swin/mask-rcnn_swin-s-p4-w7_fpn_amp-ms-crop-3x_coco.py']
custom_imports = dict(imports=['downstream'], allow_failed_imports=False)
