"""hetdeploy: deploy an ONNX network onto a heterogeneous CPU/GPU/FPGA board.

The Python API (``hetdeploy/commands/api.py``): ``plan``, ``build``, ``load``, ``sweep``; ``UserError`` for
mistakes.

The package is the pipeline, one subpackage per stage, each importing only those before it:
``core`` (what every stage shares), ``intake`` (the model read and normalised), ``planning`` (the options and
the pure algorithms: cost, partition, folding, memory), ``fpga`` (hls4ml and our C++ tops), ``running`` (the
plan run on the host, checked and packaged), ``steps`` (the build as named steps) and ``commands`` (the CLI, the
API and the sweep). ``boards/`` holds the board files, ``hls/`` the C++ and Tcl templates.
"""

__version__ = "0.1.0"

from .commands.api import Pipeline, build, load, plan, sweep  # noqa: E402
from .core.errors import UserError  # noqa: E402

__all__ = ["Pipeline", "UserError", "build", "load", "plan", "sweep", "__version__"]
