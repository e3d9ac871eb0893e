# ScaleNet Table VIII, Swin-Small + ScaleNet: as the Swin-T config, from mmdet's Swin-S Mask R-CNN 3x detector
# (parameter increment +1.7M, the ImageNet setting).
_base_ = ['./mask-rcnn_scalenet-swin-t-2x-p4-w7_fpn_1x_coco.py']
detector = 'https://download.openmmlab.com/mmdetection/v2.0/swin/mask_rcnn_swin-s-p4-w7_fpn_fp16_ms-crop-3x_coco/mask_rcnn_swin-s-p4-w7_fpn_fp16_ms-crop-3x_coco_20210903_104808-b92c91f1.pth'  # noqa
load_from = detector
model = dict(backbone=dict(model_name='scalenet_swin_small_2x', model_kwargs=dict(base_checkpoint=detector)))
