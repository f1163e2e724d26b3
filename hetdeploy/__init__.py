"""hetdeploy: deploy an ONNX network onto a heterogeneous CPU/GPU/FPGA board."""

__version__ = "0.1.0"
