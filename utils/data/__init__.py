"""Data stage: CIFAR-10 files (found, verified, read safely), synthetic images, and the
loaders that turn either into training and test batches on the device."""
