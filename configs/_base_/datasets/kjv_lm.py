# The embedded text default: the King James Bible (public domain, 1611; ~0.8M words) from Debian's bible-kjv
# package (make setup installs it), exported once to ~/.cache/depthbench/data/kjv/{train,valid}.txt (one verse a
# line; every 20th chapter held out for validation). No download. data.root overrides the export folder.
_base_ = ['./wikitext103_lm.py']
data = dict(type='kjv', root=None, train_split='train', val_split='valid', workers=0)
