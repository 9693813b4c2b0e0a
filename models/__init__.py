"""The models: families.py the family table (no torch), factory.py builds torchvision's models
for 10 classes and 32x32 CIFAR images, vit.py the CIFAR ViTs."""
