"""Training and test batches, made on the training device from uint8 tensors held there.

CIFAR-10 is 150 MB as uint8, so it fits on any GPU. Keeping it there and augmenting whole
batches with tensor ops (as airbench and hlb-CIFAR10 do) means the input pipeline never
hides the speedup that mixed precision brings.
"""
import torch
import torch.nn.functional as F

MEAN = (0.4914, 0.4822, 0.4465)  # CIFAR-10 training-set channel means and standard deviations
STD = (0.2470, 0.2435, 0.2616)
PADDING = 4


class Normalize:
    """uint8 images -> float32 (x / 255 - mean) / std, in one multiply and one subtract."""

    def __init__(self, device):
        std = torch.tensor(STD, device=device).view(1, 3, 1, 1)
        self.scale = 1.0 / (255.0 * std)
        self.shift = torch.tensor(MEAN, device=device).view(1, 3, 1, 1) / std

    def __call__(self, images):
        return images.float().mul_(self.scale).sub_(self.shift)


def random_crop_flip(images, generator, padding=PADDING):
    """Per image: a random 32x32 crop of the zero-padded image (offsets uniform in 0..2*padding)
    and a horizontal flip with probability 1/2, as torchvision's RandomCrop(32, padding=4) and
    RandomHorizontalFlip do, done for the whole batch as one gather."""
    n, c, h, w = images.shape
    device = images.device
    padded = F.pad(images, (padding, padding, padding, padding))
    dy = torch.randint(0, 2 * padding + 1, (n, 1), device=device, generator=generator)
    dx = torch.randint(0, 2 * padding + 1, (n, 1), device=device, generator=generator)
    flip = torch.randint(0, 2, (n, 1), device=device, generator=generator).bool()
    columns = torch.arange(w, device=device)
    rows = dy + torch.arange(h, device=device)  # n x h
    cols = dx + torch.where(flip, columns.flip(0), columns)  # n x w
    batch_index = torch.arange(n, device=device).view(n, 1, 1, 1)
    channel_index = torch.arange(c, device=device).view(1, c, 1, 1)
    return padded[batch_index, channel_index, rows.view(n, 1, h, 1), cols.view(n, 1, 1, w)]


class DeviceLoader:
    """An endless stream of augmented, normalised training batches.

    Each epoch is a fresh permutation drawn on the device; batches are consecutive slices of
    the stream of permutations, so every batch is full and every image appears exactly once
    per epoch (an epoch's last partial batch is completed from the next permutation).
    """

    def __init__(self, images, labels, batch_size, device, seed):
        self.images = images.to(device)
        self.labels = labels.to(device)
        self.batch_size = batch_size
        self.device = device
        self.normalize = Normalize(device)
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(seed)
        self.order = torch.empty(0, dtype=torch.long, device=device)
        self.position = 0
        self.epoch = 0

    def __len__(self):
        """Batches per epoch, rounded up."""
        return -(-len(self.images) // self.batch_size)

    def next_indices(self):
        parts, wanted = [], self.batch_size
        while wanted:
            if self.position == len(self.order):
                self.order = torch.randperm(len(self.images), device=self.device, generator=self.generator)
                self.position = 0
                self.epoch += 1
            take = min(wanted, len(self.order) - self.position)
            parts.append(self.order[self.position:self.position + take])
            self.position += take
            wanted -= take
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    def __iter__(self):
        return self

    def __next__(self):
        index = self.next_indices()
        images = random_crop_flip(self.images[index], self.generator)
        return self.normalize(images), self.labels[index]


def eval_batches(images, labels, batch_size, device):
    """The test set in order, unaugmented and normalised, one batch at a time."""
    normalize = Normalize(device)
    images, labels = images.to(device), labels.to(device)
    for start in range(0, len(images), batch_size):
        yield normalize(images[start:start + batch_size]), labels[start:start + batch_size]


def synthetic_images(count, device, seed):
    """Fixed random uint8 images and labels of CIFAR shape, made on the device."""
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    images = torch.randint(0, 256, (count, 3, 32, 32), dtype=torch.uint8, device=device, generator=generator)
    labels = torch.randint(0, 10, (count,), device=device, generator=generator)
    return images, labels
