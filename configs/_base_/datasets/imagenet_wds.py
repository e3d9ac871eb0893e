# ImageNet-1K as WebDataset shards in timm's layout (<root>/_info.json naming the splits, shard files and sample
# counts), for multi-node runs streaming from a shared file system. Same augmentation as imagenet.py.
_base_ = ['./imagenet.py']
data = dict(type='wds', root='data/imagenet-wds', train_split='train', val_split='validation')
