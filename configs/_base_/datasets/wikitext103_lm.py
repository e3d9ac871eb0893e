# WikiText-103 raw (StepsNet Sec. 4.4 / Appendix A): the standard files wiki.{train,valid,test}.tokens in data.root,
# byte-level BPE trained locally on the training split (50K entries: the paper's "vocabulary of size 50K"; the
# tokenizer itself is [ASSUMED], docs/lm.md), packed into 128-token blocks (the paper's sequence length).
# Validation perplexity on wiki.valid.tokens each epoch; the test split: data.val_split=wiki.test.tokens.
data = dict(
    type='text',
    root='data/wikitext-103-raw',
    train_split='wiki.train.tokens',
    val_split='wiki.valid.tokens',
    seq_len=128,
    vocab_size=50000,
    tokenizer=None,  # a tokenizer.json to use instead of the locally trained BPE
    num_classes=50000,  # (unused by the LMs; kept for the generic model-argument path)
    input_size=128,
    workers=2,
    pin_memory=True,
    eval_batch_size=None,
    repeated_aug=False,
    num_repeats=3,
    train_subset=None,  # a fixed random subset of this many training blocks (quick runs)
    val_subset=None,
)
aug = dict(mixup=0.0, cutmix=0.0, cutmix_minmax=None, smoothing=0.0)  # token data: no augmentation
