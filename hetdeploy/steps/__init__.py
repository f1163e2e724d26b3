"""The build as a list of named steps over one state (``build``: the list, its runner, the checkpoint's
``--to-step`` and ``--from-step``); the steps that join the stages: planning the model (``plan_model``),
writing the subfunction models (``subfunctions``), generating and C-simulating the FPGA units (``generate``).

May import: core, intake, planning, fpga, running.
"""
