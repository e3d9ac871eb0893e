# StepsNet Table 3, Swin-T row: mmseg's own Swin-T UperNet 160k config, unchanged — the StepsNet paper uses "the
# same training setting as Swin Transformer" (Appendix A): AdamW 6e-5, weight decay 0.01, poly LR after a
# 1500-iteration warm-up, crop 512, drop path 0.3, batch 16.
_base_ = ['mmseg::swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py']
custom_imports = dict(imports=['downstream'], allow_failed_imports=False)
