# Embedded LM preset (CPU, minutes, no download): a plain 4-block Transformer LM of width 128 on the King James
# Bible (configs/_base_/datasets/kjv_lm.py), BPE vocabulary 4096, 128-token blocks; validation perplexity.
# Its Steps counterpart: steps-lm-w128-d8_1xb32-2e_kjv-lm.py (same parameter budget).
_base_ = ['../_base_/datasets/kjv_lm.py', '../_base_/schedules/lm_adamw_cosine.py']
model = dict(name='transformer_lm_30m', steps=((128, 2, 4),), vocab_size=4096, seq_len=128)
data = dict(vocab_size=4096, train_subset=1536, val_subset=256)
epochs = 2
batch_size = 32
optim = dict(lr=2e-3)
sched = dict(warmup_epochs=0)
precision = 'fp32'  # CPUs without bf16 units are faster in fp32
log_interval = 8
