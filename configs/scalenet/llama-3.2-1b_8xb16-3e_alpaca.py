# ScaleNet Table X, "-" row's model: Llama-3.2-1B as pretrained. The printed row matches the pretrained model's
# zero-shot scores, so it is evaluated as is:
#   depthbench eval configs/scalenet/llama-3.2-1b_8xb16-3e_alpaca.py --checkpoint /path/Llama-3.2-1B --dataset lm-eval
# Training it (a plain Alpaca fine-tune, all parameters, Stanford Alpaca's lr 2e-5) is the other reading of the
# row [ASSUMED; docs/lm.md]: depthbench train configs/scalenet/llama-3.2-1b_8xb16-3e_alpaca.py --nproc 8 ...
_base_ = ['./scalenet-llama-3.2-1b-2x_8xb16-3e_alpaca.py']
model = dict(name='llama_3_2_1b', scalenet=None, trainable='all')
optim = dict(lr=2e-5)
