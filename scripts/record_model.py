"""Records the gradients of a model gradscope did not write (torchvision's ResNet-18 or VGG-16, or a
small Transformer encoder) training briefly on Fashion-MNIST, with gradscope.Recorder: real
whole-model gradient vectors of 1e7 to 1e8 elements for `gradscope bench kernels --input` and
`gradscope analyze` (docs/BENCHMARKS.md).

    PYTHONPATH=build/python python3 scripts/record_model.py resnet18 --steps 40 --every 10 --out r18.h5
"""

import argparse

import torch
import torchvision

import gradscope


class Encoder(torch.nn.Module):
    """Rows of the image as a sequence of 28 tokens, a Transformer encoder, a linear head."""

    def __init__(self, width=256, layers=4):
        super().__init__()
        self.embed = torch.nn.Linear(28, width)
        self.position = torch.nn.Parameter(torch.zeros(28, width))
        layer = torch.nn.TransformerEncoderLayer(width, nhead=8, dim_feedforward=4 * width, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers)
        self.head = torch.nn.Linear(width, 10)

    def forward(self, x):
        tokens = self.embed(x.flatten(1, 2).reshape(-1, 28, 28)) + self.position
        return self.head(self.encoder(tokens).mean(1))


def make(name):
    if name == "resnet18":
        return torchvision.models.resnet18(num_classes=10), lambda x: x.expand(-1, 3, -1, -1)
    if name == "vgg16":
        pad = torch.nn.ZeroPad2d(2)  # 32 x 32: five poolings to 1 x 1
        return torchvision.models.vgg16(num_classes=10), lambda x: pad(x).expand(-1, 3, -1, -1)
    if name == "transformer":
        return Encoder(), lambda x: x
    raise SystemExit(f"unknown model {name}: resnet18, vgg16 or transformer")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", choices=["resnet18", "vgg16", "transformer"])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--every", type=int, default=10)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--out", required=True)
    p.add_argument("--force", action="store_true")
    p.add_argument(
        "--compression",
        choices=gradscope.Recorder.compressions(),
        help="the snapshot's codec (default: gradscope's default, the first choice)",
    )
    args = p.parse_args()
    torch.manual_seed(1)
    model, prepare = make(args.model)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    x, y = gradscope.fashion_mnist("train", args.steps * args.batch)
    params = sum(p.numel() for p in model.parameters())
    print(f"{args.model}: {params} parameters, {args.steps} steps, recording every {args.every}")
    with gradscope.Recorder(
        model,
        args.out,
        every=args.every,
        force=args.force,
        dataset="fashion-mnist",
        seed=1,
        compression=args.compression,
    ) as rec:
        for step in range(args.steps):
            xb, yb = x[step * args.batch : (step + 1) * args.batch], y[step * args.batch : (step + 1) * args.batch]
            rec.begin_step(step)
            loss = torch.nn.functional.cross_entropy(model(prepare(xb)), yb)
            opt.zero_grad()
            loss.backward()
            rec.end_step(loss, args.lr)
            opt.step()
            if step % args.every == 0:
                print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
