"""FPGA generation: each execution unit through hls4ml (``hls4ml_adapter``) and our top, wrappers, Makefile and
Tcl over them (``hls_top``, filling the templates in ``hetdeploy/hls/``).

May import: core, intake, planning.
"""
