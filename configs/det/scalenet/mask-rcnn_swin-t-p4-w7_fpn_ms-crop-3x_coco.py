# ScaleNet Table VIII, Swin-Tiny baseline: mmdet's own Swin-T Mask R-CNN 3x (multi-scale + crop) config, whose
# released detector (46.0 box AP) is the ScaleNet paper's starting point.
_base_ = ['mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_ms-crop-3x_coco.py']
custom_imports = dict(imports=['downstream'], allow_failed_imports=False)
