"""hetdeploy: deploy an ONNX network onto a heterogeneous CPU/GPU/FPGA board.

The Python API (``hetdeploy/api.py``): ``plan``, ``build``, ``load``, ``sweep``; ``UserError`` for mistakes.
"""

__version__ = "0.1.0"

# The stage modules named like the API's functions load first, so that the names below stay the
# functions (a submodule imported later would otherwise rebind its name on the package).
from . import build as _build_stage, plan as _plan_data, sweep as _sweep_stage  # noqa: E402,F401
from .api import Pipeline, build, load, plan, sweep  # noqa: E402
from .errors import UserError  # noqa: E402

__all__ = ["Pipeline", "UserError", "build", "load", "plan", "sweep", "__version__"]
