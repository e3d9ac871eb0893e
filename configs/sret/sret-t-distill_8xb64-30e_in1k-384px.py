# SReT-T fine-tuned at 384 from the distilled 224 model (paper Table 8): lr 5e-6, weight decay 0 (paper), and
# [ASSUMED, DeiT] 30 epochs at constant lr, no warm-up, distillation continued with the teacher at 384.
_base_ = ['./sret-t-distill_8xb64-300e_in1k.py']
model = dict(name='SReT_T_finetune_384', pretrained='checkpoints/sret-t-distill-224.pth')
epochs = 30
optim = dict(lr=5e-6, lr_base_batch=None, weight_decay=0.0)
sched = dict(sched='constant', warmup_epochs=0, min_lr=5e-6)
data = dict(input_size=384, crop_pct=1.0)
