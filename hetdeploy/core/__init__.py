"""What every stage shares: the plan and its file formats (``plan``, ``checkpoint``, ``plan_text``), the board
files (``board``), the graph view of a model (``graph``), fixed-point types (``precision``), the board-side
runtime that the host's emulation and the cost model share (``board_runtime``), g++ and its C-simulation child
(``csim``, ``csim_child``), the build cache, errors, progress and the output folder.

May import: nothing else of hetdeploy.
"""
