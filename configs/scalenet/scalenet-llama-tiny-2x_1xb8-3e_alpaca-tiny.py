# CI preset of the ScaleNet Llama path (CPU, seconds, no download): a tiny randomly initialised Llama
# (harness/assets/llama/tiny-llama.json: 2 layers of width 64, vocabulary 512) expanded 2x with rank-4 adapters,
# tuned 3 epochs on 126 hand-written Alpaca-format instructions (harness/assets/llama/alpaca_tiny.json) with a
# 512-entry byte-level BPE trained on them; then
#   depthbench eval configs/scalenet/scalenet-llama-tiny-2x_1xb8-3e_alpaca-tiny.py --checkpoint RUN_DIR \
#       --dataset lm-eval --tasks depthbench_tiny_mc
# The base weights are random, so everything trains (trainable='all').
_base_ = ['./scalenet-llama-3.2-1b-2x_8xb16-3e_alpaca.py']
model = dict(
    name='scalenet_llama_tiny_2x',
    config='{{ fileDirname }}/../../harness/assets/llama/tiny-llama.json',
    weights=None,
    scalenet=dict(k=2, rank=4),
    trainable='all',
)
data = dict(
    root='{{ fileDirname }}/../../harness/assets/llama/alpaca_tiny.json',
    tokenizer=None,
    vocab_size=512,
    val_size=16,
    max_length=256,
)
epochs = 3
batch_size = 8
precision = 'fp32'  # CPUs without bf16 units are faster in fp32
optim = dict(lr=3e-3)
sched = dict(warmup_epochs=0)
log_interval = 2
