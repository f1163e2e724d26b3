"""A plan run and checked on the host, and packaged for the board: the runtime that chains onnxruntime and
the C-simulation libraries (``runtime``), the checks against the reference (``verify``, the --error-budget
search in ``budget``), the samples, ``emulate``, the deployment package (``deploy``) and the report.

May import: core, intake, planning, fpga.
"""
