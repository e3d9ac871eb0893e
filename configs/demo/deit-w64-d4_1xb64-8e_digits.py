# make demo (harness/commands/demo.py), StepsNet Table 1's question at reduced width and resolution: a DeiT of 4 blocks at
# width 64 (2 heads) on the bundled digits at 16x16 (patch 4), the embedded DeiT recipe shortened to 8 epochs.
# Its Steps twin, steps-deit-w64-d8_1xb64-8e_digits.py, has the same parameters and FLOPs (the demo audits both
# with harness/measure/flops.py).
_base_ = ['../deit/deit-tiny-p4_1xb64-30e_digits.py']
model = dict(name='deit_tiny_patch16_224', embed_dim=64, num_heads=2, depth=4)
epochs = 8
sched = dict(warmup_epochs=1)
