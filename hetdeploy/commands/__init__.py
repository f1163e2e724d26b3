"""What a user calls: the command line (``cli``), the Python API (``api``) and the sweep over boards and
settings on Dask (``sweep``).

May import: core, intake, planning, fpga, running, steps.
"""
