"""The model read, checked and normalised for the stages after it (``model``, the graph rewrites in
``rewrites``), the adapters to onnxruntime and qonnx that run it, and the subfunction cut out of it as its
own ONNX model (``subgraph``).

May import: core.
"""
