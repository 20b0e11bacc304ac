"""A kubelet test double that speaks the real kubelet APIs over real unix sockets.

Layout (one module per kubelet part, so more can be added beside them):
- registration.py: the Registration service the kubelet serves on kubelet.sock;
- devicemanager.py: the device manager's side of a plugin: dial, GetDevicePluginOptions, ListAndWatch,
  GetPreferredAllocation, Allocate;
- kubelet.py: KubeletDouble, which ties them to a socket directory and restarts like the kubelet
  (delete every socket but the checkpoint, then recreate kubelet.sock).
"""

from tests.kubeletdouble.devicemanager import PluginClient
from tests.kubeletdouble.kubelet import CHECKPOINT, KubeletDouble

__all__ = ["CHECKPOINT", "KubeletDouble", "PluginClient"]
