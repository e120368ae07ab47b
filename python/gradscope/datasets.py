"""Fashion-MNIST (Debian's dataset-fashion-mnist, or the directory $GS_FASHION_MNIST_DIR names),
read by gradscope's own IDX reader (magic numbers and sizes checked), as training tensors."""

import torch

from . import _gradscope

# The training images' pixel mean and standard deviation, pixels scaled to [0, 1]: the
# normalization gradscope's own models train with (gs/train/dataset.hpp).
MEAN = 0.2860
STD = 0.3530


def fashion_mnist(split="train", count=None):
    """(images, labels) of the "train" (60000) or "test" (10000) split, or its first `count`:
    images float32 [n, 1, 28, 28], (pixel / 255 - MEAN) / STD; labels int64 [n], 0..9.
    A missing dataset raises gradscope.Error naming the package to install."""
    pixels, labels = _gradscope.fashion_mnist(split)
    if count is not None:
        pixels, labels = pixels[:count], labels[:count]
    x = torch.from_numpy(pixels).to(torch.float32).unsqueeze(1) / 255.0
    return (x - MEAN) / STD, torch.from_numpy(labels).to(torch.int64)
