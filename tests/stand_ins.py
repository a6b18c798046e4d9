"""Stand-ins for what public programs import besides torch and cannot have here: torchvision's datasets
(downloads), transforms and image files. Images are NumPy float32 arrays in [0, 1], channels first (what
`transforms.ToTensor()` makes of a picture), so the framework's own DataLoader collates them into its
tensors. `torchvision(images, labels)` is a {module name: module} dict to put in sys.modules."""
import types

import numpy as np


class ImageSet:
    """A map-style dataset of (image, label) with an optional transform (torchvision's datasets' shape)."""

    def __init__(self, images, labels, transform=None):
        self.images, self.labels, self.transform = images, labels, transform

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        image = self.images[i]
        return (self.transform(image) if self.transform else image), int(self.labels[i])


def images(n, shape, seed):
    """`n` deterministic images of `shape` (channels first) with labels 0-9."""
    rs = np.random.default_rng(seed)
    return rs.random((n,) + tuple(shape), dtype=np.float32), rs.integers(0, 10, n)


def torchvision(pictures, labels, saved=None):
    """torchvision, torchvision.datasets (FakeData, MNIST, CIFAR10 and ImageFolder all serve `pictures`),
    torchvision.transforms (ToTensor keeps the array; Normalize and Compose compute; Resize and CenterCrop
    require the size the images already have) and torchvision.utils (save_image records the shape it was
    given in `saved`)."""
    tv, datasets, transforms, utils = (types.ModuleType(n) for n in (
        "torchvision", "torchvision.datasets", "torchvision.transforms", "torchvision.utils"))

    def dataset(*args, transform=None, **kwargs):
        return ImageSet(pictures, labels, transform)

    for name in ("FakeData", "MNIST", "CIFAR10", "ImageFolder"):
        setattr(datasets, name, dataset)

    def same_size(size):
        def check(image):
            assert image.shape[-1] == (size if isinstance(size, int) else size[-1]), (image.shape, size)
            return image
        return check

    def normalize(mean, std):
        mean, std = np.asarray(mean, np.float32)[:, None, None], np.asarray(std, np.float32)[:, None, None]
        return lambda image: (image - mean) / std

    def compose(steps):
        def run(image):
            for step in steps:
                image = step(image)
            return image
        return run

    transforms.ToTensor = lambda: (lambda image: image)
    transforms.Normalize, transforms.Compose = normalize, compose
    transforms.Resize = transforms.CenterCrop = same_size
    utils.save_image = lambda tensor, path, **kwargs: (saved if saved is not None else []).append(
        (tuple(tensor.shape), str(path)))
    tv.datasets, tv.transforms, tv.utils = datasets, transforms, utils
    return {"torchvision": tv, "torchvision.datasets": datasets, "torchvision.transforms": transforms,
            "torchvision.utils": utils}


class ByteTokenizer:
    """tiktoken's Encoding as the programs call it (`encode(text, allowed_special=...)`, `decode(ids)`), over
    the text's UTF-8 bytes: a 256-token vocabulary (tiktoken's GPT-2 table is a download)."""

    n_vocab = 256

    def encode(self, text, allowed_special=(), **kwargs):
        return list(text.encode("utf-8"))

    def decode(self, ids):
        return bytes(int(i) for i in ids).decode("utf-8", errors="replace")


def tiktoken():
    """{"tiktoken": module} whose get_encoding(name) is a ByteTokenizer."""
    module = types.ModuleType("tiktoken")
    module.get_encoding = lambda name: ByteTokenizer()
    return {"tiktoken": module}


def prose(n_words, seed):
    """Deterministic text of `n_words` words over a small vocabulary (a corpus with structure to learn)."""
    rs = np.random.default_rng(seed)
    words = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "to", "every", "effort", "moves", "you"]
    return " ".join(words[i] for i in rs.integers(0, len(words), n_words)) + "\n"
