"""The models and data of the training studies (scripts/controller.py, scripts/speedup.py), written
as users write their own: a small ViT, a CNN with BatchNorm, a GRU language model, a model with
frozen, unused and sometimes-used branches, and torchvision's ResNet-18 (the frontier's setup,
docs/RESULTS.md). Each is a Task: a model, the batches of each worker, a loss and an evaluation.

Data: Fashion-MNIST (Debian's dataset-fashion-mnist, through gradscope.fashion_mnist) for the
image models; for the language model, the text of /usr/share/common-licenses (Debian's licence
texts, about 250 KB of English), read by characters.
"""

import glob
import os

import torch
import torchvision

import gradscope

TASKS = ("vit", "cnn-bn", "gru", "branchy", "resnet18")
LICENSES = "/usr/share/common-licenses"


class ViT(torch.nn.Module):
    """A small vision transformer: 7x7 patches (16 tokens) of a 28x28 image, a class token, a
    learnt positional embedding (a free-standing Parameter), pre-norm encoder blocks."""

    def __init__(self, dim=96, depth=4, heads=4, mlp=192, patch=7):
        super().__init__()
        self.patch = patch
        tokens = (28 // patch) ** 2
        self.embed = torch.nn.Linear(patch * patch, dim)
        self.cls = torch.nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = torch.nn.Parameter(0.02 * torch.randn(1, tokens + 1, dim))
        layer = torch.nn.TransformerEncoderLayer(dim, heads, mlp, dropout=0.0, batch_first=True, norm_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, depth)
        self.norm = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, 10)

    def forward(self, x):
        p = self.patch
        b = x.shape[0]
        patches = x.unfold(2, p, p).unfold(3, p, p).reshape(b, -1, p * p)
        t = torch.cat([self.cls.expand(b, -1, -1), self.embed(patches)], 1) + self.pos
        return self.head(self.norm(self.encoder(t))[:, 0])


class CnnBn(torch.nn.Module):
    def __init__(self):
        super().__init__()

        def block(cin, cout):
            return [torch.nn.Conv2d(cin, cout, 3, padding=1, bias=False), torch.nn.BatchNorm2d(cout), torch.nn.ReLU()]

        self.features = torch.nn.Sequential(
            *block(1, 32),
            *block(32, 32),
            torch.nn.MaxPool2d(2),
            *block(32, 64),
            *block(64, 64),
            torch.nn.MaxPool2d(2),
            *block(64, 128),
            torch.nn.AdaptiveAvgPool2d(1),
        )
        self.head = torch.nn.Linear(128, 10)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


class GruLM(torch.nn.Module):
    """A character-level language model: embedding, a 2-layer GRU, a linear decoder."""

    def __init__(self, vocab, dim=64, hidden=256):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim)
        self.gru = torch.nn.GRU(dim, hidden, num_layers=2, batch_first=True)
        self.out = torch.nn.Linear(hidden, vocab)

    def forward(self, x):
        return self.out(self.gru(self.embed(x))[0])


class Branchy(torch.nn.Module):
    """A CNN with a frozen stem (requires_grad False), a branch no forward uses, and a branch the
    even steps use (DDP's find_unused_parameters)."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(1, 16, 3, padding=1)
        for p in self.stem.parameters():
            p.requires_grad_(False)
        self.conv = torch.nn.Conv2d(16, 32, 3, padding=1, stride=2)
        self.mid = torch.nn.Linear(32 * 14 * 14, 128)
        self.sometimes = torch.nn.Linear(128, 128)
        self.unused = torch.nn.Linear(128, 128)
        self.head = torch.nn.Linear(128, 10)
        self.use_branch = True

    def forward(self, x):
        h = torch.relu(self.mid(torch.relu(self.conv(torch.relu(self.stem(x)))).flatten(1)))
        if self.use_branch:
            h = h + torch.relu(self.sometimes(h))
        return self.head(h)


def resnet18():
    return torchvision.models.resnet18(num_classes=10)


class Task:
    """A model, each worker's batches (every worker its own share of the data, in a fixed order
    per seed), the loss and the evaluation of rank 0's replica."""

    find_unused_parameters = False

    def before_step(self, model, step):
        """Anything that changes the model's graph at a step (the branchy model's branch)."""


class ImageTask(Task):
    def __init__(self, name, seed, rank, world, batch):
        self.name, self.batch = name, batch
        x, y = gradscope.fashion_mnist("train")
        order = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
        self.x, self.y, self.mine = x, y, order[rank::world]
        self.rgb = name == "resnet18"  # torchvision's ResNet takes 3 channels: the image repeated
        self.find_unused_parameters = name == "branchy"

    def model(self):
        return {"vit": ViT, "cnn-bn": CnnBn, "branchy": Branchy, "resnet18": resnet18}[self.name]()

    def before_step(self, model, step):
        if self.name == "branchy":
            model.use_branch = step % 2 == 0

    def _input(self, x):
        return x.expand(-1, 3, -1, -1) if self.rgb else x

    def loss(self, model, step):
        start = (step * self.batch) % (len(self.mine) - self.batch)
        idx = self.mine[start : start + self.batch]
        return torch.nn.functional.cross_entropy(model(self._input(self.x[idx])), self.y[idx])

    def evaluate(self, model, images=None):
        """Test accuracy on the first `images` test images (default: all 10,000)."""
        return test_accuracy(model, images, rgb=self.rgb)


def test_accuracy(model, images=None, rgb=False):
    """Accuracy of an image model on the first `images` Fashion-MNIST test images (default: all),
    given as 3 channels (the image repeated) where rgb."""
    tx, ty = gradscope.fashion_mnist("test")
    tx, ty = tx[:images], ty[:images]
    model.eval()
    with torch.no_grad():
        right = sum(
            int((model(tx[i : i + 500].expand(-1, 3 if rgb else 1, -1, -1)).argmax(1) == ty[i : i + 500]).sum())
            for i in range(0, len(ty), 500)
        )
    model.train()
    return right / len(ty)


def license_text():
    """Debian's licence texts, concatenated in name order, as bytes."""
    files = sorted(f for f in glob.glob(os.path.join(LICENSES, "*")) if os.path.isfile(f))
    if not files:
        raise SystemExit(f"no text under {LICENSES}: the GRU language model reads Debian's licence texts")
    return b"\n".join(open(f, "rb").read() for f in files)


class TextTask(Task):
    """Next-character prediction: windows of 64 characters, the last tenth of the text held out."""

    def __init__(self, seed, rank, world, batch, window=64):
        text = torch.tensor(list(license_text()), dtype=torch.int64)
        self.vocab = 256
        cut = len(text) * 9 // 10
        self.train_text, self.test_text = text[:cut], text[cut:]
        self.window, self.batch = window, batch
        starts = torch.randperm(cut - window - 1, generator=torch.Generator().manual_seed(seed))
        self.mine = starts[rank::world]

    def model(self):
        return GruLM(self.vocab)

    def _windows(self, text, starts):
        idx = starts[:, None] + torch.arange(self.window + 1)
        w = text[idx]
        return w[:, :-1], w[:, 1:]

    def loss(self, model, step):
        start = (step * self.batch) % (len(self.mine) - self.batch)
        x, y = self._windows(self.train_text, self.mine[start : start + self.batch])
        return torch.nn.functional.cross_entropy(model(x).reshape(-1, self.vocab), y.reshape(-1))

    def evaluate(self, model, images=None):  # noqa: ARG002 (a text model has no test images)
        """Next-character accuracy on the held-out tenth (its first 512 windows)."""
        starts = torch.arange(0, min(512 * self.window, len(self.test_text) - self.window - 1), self.window)
        x, y = self._windows(self.test_text, starts)
        model.eval()
        with torch.no_grad():
            right = int((model(x).argmax(-1) == y).sum())
        model.train()
        return right / y.numel()


def task(name, seed, rank, world, batch=32):
    if name not in TASKS:
        raise SystemExit(f"unknown model {name!r}: use {', '.join(TASKS)}")
    return TextTask(seed, rank, world, batch) if name == "gru" else ImageTask(name, seed, rank, world, batch)
