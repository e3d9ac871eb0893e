# Alpaca-format instruction tuning (ScaleNet Table X; harness/tasks/alpaca.py): data.root is a JSON list of
# {instruction, input, output} records -- Stanford Alpaca's alpaca_data.json (52,002 records) for the paper's run.
# The standard Alpaca prompt, loss on the response tokens only, sequences cut at 512 tokens (spec §2.9).
# data.val_size records (a fixed random choice) are held out: response-token loss/perplexity each epoch [ASSUMED:
# the paper names no validation set].
data = dict(
    type='alpaca',
    root='data/alpaca/alpaca_data.json',
    train_split='train',
    val_split='val',
    val_size=256,
    max_length=512,
    tokenizer=None,  # the checkpoint's tokenizer (its directory or a tokenizer.json); None: a byte-level BPE
    vocab_size=512,  # ... of this many entries trained on data.root (random-weight models only)
    num_classes=None,  # (image keys, unused by language models)
    input_size=None,
    workers=0,
    pin_memory=True,
    eval_batch_size=None,
    repeated_aug=False,
    num_repeats=3,
    train_subset=None,  # a fixed random subset of this many training records (quick runs)
    val_subset=None,
)
aug = dict(mixup=0.0, cutmix=0.0, cutmix_minmax=None, smoothing=0.0)  # token data: no augmentation
