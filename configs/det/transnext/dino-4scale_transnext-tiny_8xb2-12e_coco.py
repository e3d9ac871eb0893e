# TransNeXt Table 13, TransNeXt-Tiny 4-scale: mmdet's DINO (900 queries, 6+6 layers, two-stage, box refinement,
# 100 denoising queries; DETR-style multi-scale + crop augmentation, no padding divisor) on backbone stages 2-4,
# plus ChannelMapper's extra downsampled level (TransNeXt paper Table 13 and official config).
# AdamW 1e-4, weight decay 0.05 (paper), backbone LR x0.1, grad clip 0.1; no weight decay on norms and on
# TransNeXt's query embedding / local position bias / log-CPB / temperature (official); 12 epochs, LR x0.1 at
# epoch 11; batch 16 = 8 GPUs x 1 image x 2 accumulated steps (official); fp16 with loss scale 512 (official).
# Backbone: img_size=800, pretrain_size=224, position bias interpolated; drop path 0.3 (paper = official).
_base_ = ['mmdet::dino/dino-4scale_r50_8xb2-12e_coco.py']
custom_imports = dict(imports=['downstream'], allow_failed_imports=False)
pretrained = 'checkpoints/transnext_tiny_224_1k.pth'
model = dict(
    backbone=dict(
        _delete_=True,
        type='DepthbenchBackbone',
        model_name='transnext_tiny',
        model_kwargs=dict(img_size=800, pretrain_size=224, position_bias='interpolate'),
        out_indices=(1, 2, 3),
        drop_path_rate=0.3,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained),
    ),
    neck=dict(in_channels=[144, 288, 576]),
)

train_dataloader = dict(batch_size=1)
# mmengine applies the longest matching key alone (no norm/bias rules for a matched parameter), so the
# backbone's no-decay parameters repeat its LR multiplier, with keys longer than 'backbone'. 'attn.' keeps
# DINO's own query_embedding out.
backbone_no_decay = dict(lr_mult=0.1, decay_mult=0.0)
optim_wrapper = dict(
    _delete_=True,
    type='AmpOptimWrapper',
    loss_scale=512.0,
    accumulative_counts=2,
    optimizer=dict(type='AdamW', lr=0.0001, weight_decay=0.05),
    clip_grad=dict(max_norm=0.1, norm_type=2),
    paramwise_cfg=dict(
        custom_keys={
            'backbone': dict(lr_mult=0.1),
            'backbone.model.norm': backbone_no_decay,  # stage norms norm1..norm4
            '.norm1.weight': backbone_no_decay,
            '.norm1.bias': backbone_no_decay,
            '.norm2.weight': backbone_no_decay,
            '.norm2.bias': backbone_no_decay,
            'attn.norm.weight': backbone_no_decay,
            'attn.norm.bias': backbone_no_decay,
            'patch_embed1.norm': backbone_no_decay,
            'patch_embed2.norm': backbone_no_decay,
            'patch_embed3.norm': backbone_no_decay,
            'patch_embed4.norm': backbone_no_decay,
            'attn.query_embedding': backbone_no_decay,
            'relative_pos_bias_local': backbone_no_decay,
            'attn.cpb_fc': backbone_no_decay,
            'attn.temperature': backbone_no_decay,
        }
    ),
)
