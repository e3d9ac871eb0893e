# ScaleNet Table X, "ScaleNet" row: Llama-3.2-1B expanded 2x (all 16 layers shared, Interpolate order) with
# rank-16 adapters on gate/up/down and per-instance RMSNorms, tuned 3 epochs on Stanford Alpaca (spec §2.9).
#   depthbench train configs/scalenet/scalenet-llama-3.2-1b-2x_8xb16-3e_alpaca.py --nproc 8 \
#       model.weights=/path/Llama-3.2-1B data.tokenizer=/path/Llama-3.2-1B data.root=/path/alpaca_data.json
#   depthbench eval  configs/scalenet/scalenet-llama-3.2-1b-2x_8xb16-3e_alpaca.py --checkpoint RUN_DIR --dataset lm-eval
# [ASSUMED, spec §2.9: the paper gives almost no LLM details] adapters + RMSNorms train (shared projections,
# embeddings frozen); AdamW lr 2e-4, cosine, ~3% warm-up (0.1 of 3 epochs), global batch 128, bf16, no weight decay.
_base_ = ['../_base_/datasets/alpaca.py', '../_base_/default_runtime.py']
llama = 'data/Llama-3.2-1B'  # a local copy of meta-llama/Llama-3.2-1B (config.json, model.safetensors, tokenizer)
model = dict(
    name='scalenet_llama_3_2_1b_2x',
    config='llama_3_2_1b',  # the architecture (models/scalenet_llama.py LLAMA_ARCHITECTURES); weights' must match
    weights=llama,  # Hugging Face checkpoint directory; None: random weights
    scalenet=dict(k=2, rank=16),  # 16 -> 32 layer instances
    trainable='adapters_norms',
)
data = dict(tokenizer=llama)
ckpt = dict(best_metric='ppl')  # lowest response-token perplexity on the held-out records

epochs = 3
batch_size = 128
precision = 'bf16'
clip_grad = 1.0
log_interval = 10
optim = dict(
    opt='adamw',
    lr=2e-4,
    weight_decay=0.0,
    eps=1e-8,
    betas=(0.9, 0.999),
    momentum=0.9,
    filter_bias_and_bn=True,
    layer_decay=None,
)
sched = dict(
    sched='cosine',
    warmup_epochs=0.1,
    warmup_lr=1e-6,
    min_lr=0.0,
    decay_milestones=None,
    decay_rate=0.1,
    cooldown_epochs=0,
    step_on_epochs=False,
)
