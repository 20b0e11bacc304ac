"""Generated kubelet API modules: device plugin v1beta1 and PodResources v1.

The .proto sources sit beside the generated code; plugin/gen_protos.sh regenerates it.
"""

DEVICE_PLUGIN_VERSION = "v1beta1"
"""The `version` a plugin sends in RegisterRequest; the kubelet rejects any other."""
