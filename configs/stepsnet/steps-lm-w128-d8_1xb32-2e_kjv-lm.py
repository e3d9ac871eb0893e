# Embedded LM preset (CPU, minutes, no download): a Steps-Transformer LM (widths 64, 92, 128; 4+2+2 blocks) on the King James
# Bible (configs/_base_/datasets/kjv_lm.py), BPE vocabulary 4096, 128-token blocks; validation perplexity.
# Its baseline: transformer-lm-w128-d4_1xb32-2e_kjv-lm.py.
_base_ = ['../_base_/datasets/kjv_lm.py', '../_base_/schedules/lm_adamw_cosine.py']
model = dict(name='steps_lm_30m', steps=((64, 1, 4), (92, 2, 2), (128, 2, 2)), vocab_size=4096, seq_len=128)
data = dict(vocab_size=4096, train_subset=1536, val_subset=256)
epochs = 2
batch_size = 32
optim = dict(lr=2e-3)
sched = dict(warmup_epochs=0)
precision = 'fp32'  # CPUs without bf16 units are faster in fp32
log_interval = 8
