"""What to build, decided without building: the build's options (``config``), the cost model (``cost``), the
partition into subfunctions (``partition``), execution units and their folding (``units``) and the memory
plan (``memory``, with its exact packer). These algorithms are pure: no onnx, onnxruntime, hls4ml or qonnx;
they are tested on graphs and numbers alone.

May import: core.
"""
