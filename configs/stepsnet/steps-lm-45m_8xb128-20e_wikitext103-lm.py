# StepsNet Table 4 row: steps_lm_45m (12 blocks) on WikiText-103, sequence length 128, vocabulary 50K, 1024 sequences per
# step (8 GPUs x 128). Paper: validation/test perplexity. data.root=/path/to/wikitext-103-raw.
_base_ = ['../_base_/datasets/wikitext103_lm.py', '../_base_/schedules/lm_adamw_cosine.py']
model = dict(name='steps_lm_45m', vocab_size=50000, seq_len=128)
