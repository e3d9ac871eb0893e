# CIFAR-100 in its standard python-pickle layout (train, test in <root> or <root>/cifar-100-python), 100 fine
# labels; the CIFAR-10 recipe's augmentation and normalisation with CIFAR-100's statistics (TransNeXt's small-model
# ablations, Tables 7-8, train and test on CIFAR-100).
_base_ = ['./cifar10.py']
data = dict(
    type='cifar100',
    root='data/cifar100',
    num_classes=100,
    mean=(0.5071, 0.4865, 0.4409),
    std=(0.2673, 0.2564, 0.2762),
)
