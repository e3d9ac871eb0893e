# ScaleNet: swin_tiny_patch4_window7_224 expanded 2x in depth by weight sharing (order 'stack') with rank-16 parallel
# adapters, then trained 100 epochs on ImageNet-1K (paper Sec. III-C/IV-A). The trainable set follows Sec. III-C (expand's
# trainable='spec': DeiT-T/S all parameters, DeiT-B/Swin adapters + LayerNorms); the optimizer gets only trainable
# parameters. Set model.pretrained to the ImageNet-1K-only base weights (official DeiT/Swin files or a run's
# best.pth).
_base_ = ['../_base_/datasets/imagenet.py', '../_base_/schedules/scalenet_100e.py']
model = dict(
    name='swin_tiny_patch4_window7_224',
    pretrained='checkpoints/swin_tiny_patch4_window7_224.pth',
    drop_path_rate=0.2,
    grow=dict(k=2, order='stack', adjust='adapter', rank=16),
)
data = dict(repeated_aug=False)
