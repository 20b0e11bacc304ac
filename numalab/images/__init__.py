"""Container images of the lab, built without a container engine and pushed through the registry HTTP API v2."""

from numalab.images.lab_images import LabImage, lab_images, push_lab_images
from numalab.images.push import PushedImage, RegistryClient, RegistryError

__all__ = ["LabImage", "PushedImage", "RegistryClient", "RegistryError", "lab_images", "push_lab_images"]
