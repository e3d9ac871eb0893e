# StepsNet Table 3, Steps-Swin-T row: the Swin-T UperNet recipe with depthbench's `steps_swin_tiny` backbone.
# Stage 4 is 544 wide (StepsNet Table 14), so UPerHead takes [96, 192, 384, 544]; the paper's 58M (vs 60M) comes
# from that narrower stage. Pretrained: model.backbone.init_cfg.checkpoint=<run directory or .pth>.
_base_ = ['./swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py']
pretrained = 'checkpoints/steps_swin_tiny_in1k.pth'
model = dict(
    backbone=dict(
        _delete_=True,
        type='DepthbenchBackbone',
        model_name='steps_swin_tiny',
        model_kwargs=dict(strict_img_size=False, always_partition=True),
        out_indices=(0, 1, 2, 3),
        drop_path_rate=0.3,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained),
    ),
    decode_head=dict(in_channels=[96, 192, 384, 544]),
    auxiliary_head=dict(in_channels=384),
)
