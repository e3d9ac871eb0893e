# ScaleNet Table IX, Swin-Small + ScaleNet: as the Swin-T config, from mmseg's Swin-S UperNet 160k segmentor.
_base_ = ['./scalenet-swin-tiny-2x-in1k-pre_upernet_8xb2-40k_ade20k-512x512.py']
segmentor = 'https://download.openmmlab.com/mmsegmentation/v0.5/swin/upernet_swin_small_patch4_window7_512x512_160k_ade20k_pretrain_224x224_1K/upernet_swin_small_patch4_window7_512x512_160k_ade20k_pretrain_224x224_1K_20210526_192015-ee2fff1c.pth'  # noqa
load_from = segmentor
model = dict(backbone=dict(model_name='scalenet_swin_small_2x', model_kwargs=dict(base_checkpoint=segmentor)))
