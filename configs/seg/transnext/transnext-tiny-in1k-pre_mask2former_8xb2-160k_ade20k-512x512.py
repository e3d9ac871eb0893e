# TransNeXt Table 15, TransNeXt-Tiny: mmseg's Mask2Former 160k on ADE20K (100 queries; crop 512, random resize
# 256-1024, cat_max_ratio 0.75, flip, photometric distortion; poly LR power 0.9; batch 16; single-scale whole
# test). AdamW 1e-4, weight decay 0.05, eps 1e-8, grad clip 0.01, backbone LR x0.1; no weight decay on
# query_embed / query_feat / level_embed, norms, and TransNeXt's query embedding / local position bias / log-CPB
# / temperature (official config). Backbone: img_size=512, pretrain_size=224, position bias interpolated;
# drop path 0.3 (paper = official).
_base_ = ['mmseg::mask2former/mask2former_r50_8xb2-160k_ade20k-512x512.py']
custom_imports = dict(imports=['mmdet.models', 'downstream'], allow_failed_imports=False)
pretrained = 'checkpoints/transnext_tiny_224_1k.pth'
model = dict(
    backbone=dict(
        _delete_=True,
        type='DepthbenchBackbone',
        model_name='transnext_tiny',
        model_kwargs=dict(img_size=512, pretrain_size=224, position_bias='interpolate'),
        out_indices=(0, 1, 2, 3),
        drop_path_rate=0.3,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained),
    ),
    decode_head=dict(in_channels=[72, 144, 288, 576]),
)

# mmengine applies the longest matching key alone (no norm rule for a matched parameter): the backbone's
# no-decay parameters repeat its LR multiplier, with keys longer than 'backbone'; 'attn.' keeps the head's
# names out.
backbone_no_decay = dict(lr_mult=0.1, decay_mult=0.0)
embed_multi = dict(lr_mult=1.0, decay_mult=0.0)
optim_wrapper = dict(
    paramwise_cfg=dict(
        custom_keys={
            'backbone': dict(lr_mult=0.1, decay_mult=1.0),
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
            'query_embed': embed_multi,
            'query_feat': embed_multi,
            'level_embed': embed_multi,
        },
        norm_decay_mult=0.0,
    )
)
