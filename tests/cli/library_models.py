"""Models as their libraries build them, given to --model-factory as a user writes the factory,
with no wrapper: timm's (timm.create_model) and Hugging Face transformers' (a tiny ViT built from
its config: no download). Imported as library_models under pytest (tests/cli is on sys.path) or
tests.cli.library_models from the checkout; ampbench itself never imports either library."""


def timm_resnet(num_classes):
    import timm
    return timm.create_model("test_resnet", pretrained=False, num_classes=num_classes)


def timm_vit(num_classes, image_size):
    import timm
    return timm.create_model("test_vit", pretrained=False, num_classes=num_classes, img_size=image_size, patch_size=4)


def vit_config(num_classes, image_size, **settings):
    from transformers import ViTConfig
    return ViTConfig(image_size=image_size, patch_size=4, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, num_labels=num_classes, **settings)


def hf_vit(num_classes, image_size):
    """Its forward returns an ImageClassifierOutput, whose logits the run takes."""
    from transformers import ViTForImageClassification
    return ViTForImageClassification(vit_config(num_classes, image_size))


def hf_vit_tuple(num_classes, image_size):
    """return_dict=False: the model returns tuples, which transformers' own classifier here cannot read."""
    from transformers import ViTForImageClassification
    return ViTForImageClassification(vit_config(num_classes, image_size, return_dict=False))


def hf_vit_gray(num_classes, image_size):
    """Built for one channel: transformers refuses RGB images."""
    from transformers import ViTForImageClassification
    return ViTForImageClassification(vit_config(num_classes, image_size, num_channels=1))


def hf_resnet(num_classes):
    """A convnet of transformers, from its config."""
    from transformers import ResNetConfig, ResNetForImageClassification
    return ResNetForImageClassification(ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
                                                     num_labels=num_classes))


def hf_vit_seven_labels(image_size):
    """Ignores the run's classes: seven labels, always."""
    from transformers import ViTForImageClassification
    return ViTForImageClassification(vit_config(7, image_size))


def timm_unknown(num_classes):
    import timm
    return timm.create_model("resnet_nobody_made", pretrained=False, num_classes=num_classes)


def timm_vit_for_32(num_classes):
    """Built for 32x32 images, whatever --image-size says."""
    import timm
    return timm.create_model("test_vit", pretrained=False, num_classes=num_classes, img_size=32, patch_size=4,
                             dynamic_img_size=False)
