"""The ``hetdeploy`` command.

Exit codes: 0 success; 2 bad input (model, board, options); 3 C-simulation or
emulation out of tolerance; 4 build --synth without the vendor tools (built, not synthesised); 1 an
internal error (a bug: the traceback is kept).
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

from .. import __version__
from ..core import processes
from ..core.board_runtime import BATCH_HELP, BENCHMARK_HELP, SEQUENTIAL_HELP
from ..core.errors import UserError
from ..core.plan_text import build_table, open_synth_table, plan_table
from ..planning import config


def _options(args: argparse.Namespace, **more):
    """BuildOptions from the options of ``config.OPTIONS`` the command took (_add_options), the cache's
    from --cache, --no-cache and --cache-limit (_cache); ``more``: the rest."""
    from ..planning.config import BuildOptions

    given = {}
    for option in config.OPTIONS:
        if option.field not in ("model", "cache", "cache_limit") and hasattr(args, option.key):
            value = getattr(args, option.key)
            given[option.field] = dict(value) if option.per_node and not option.listed else value
    cache = _cache(args) if hasattr(args, "cache") else {}
    return BuildOptions(model=Path(args.model), origins=getattr(args, "origins", {}), **given, **cache, **more)


def _cache(args: argparse.Namespace) -> dict:
    """build's --cache DIR / --no-cache / --cache-limit SIZE as BuildOptions fields (absent: the default
    folder and limit)."""
    if args.no_cache:
        return {"cache": None}
    limit = {"cache_limit": args.cache_limit} if args.cache_limit is not None else {}
    return {"cache": Path(args.cache), **limit} if args.cache else limit


def _with_config(top: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str]) -> argparse.Namespace:
    """``args`` with --config FILE's options as the defaults the command line overrides (per-node
    settings given on both are merged); then the model and board, from either, are required."""
    origins = {}
    if getattr(args, "config", None) is not None:
        defaults = {}
        loaded = config.load_config(args.config)
        origins = loaded.pop("origins", {})  # where the file set each per-node setting, for its error lines
        for name, value in loaded.items():
            dest = next(o.key for o in config.OPTIONS if o.field == name)  # the argparse destination
            if name == "cache" and value is None:
                dest, value = "no_cache", True  # 'cache: null': none
            if hasattr(args, dest):  # not a build-only key (tolerance, synth, cache) read by plan
                defaults[dest] = list(value.items()) if isinstance(value, dict) else value
        args.command_parser.set_defaults(**defaults)
        args = top.parse_args(argv)
    args.origins = origins
    if hasattr(args, "board"):
        missing = [what for what, value in (("the model", args.model), ("--board", args.board)) if value is None]
        if missing:
            args.command_parser.error(f"{' and '.join(missing)} {'are' if len(missing) > 1 else 'is'} required (on "
                                      f"the command line or in --config)")
        args.model = str(args.model)
    return args


def _config(args: argparse.Namespace) -> int:
    from ..planning.config import config_yaml
    from ..running.emulate import load_build

    plan = load_build(Path(args.build_dir))
    if not plan.config:
        raise UserError(f"{args.build_dir}: its plan.json records no configuration (built by an older hetdeploy)")
    config = dict(plan.config, nodes={node: dict(settings) for node, settings in plan.config["nodes"].items()})
    if args.folding:
        for unit in (u for s in plan.subfunctions for u in s.execution_units if u.io_type):  # hls4ml's units
            settings = config["nodes"].setdefault(unit.nodes[0], {})
            if unit.foldable:
                settings["reuse_factor"] = unit.reuse_factor
                settings["strategy"] = unit.strategy.lower()
                if unit.weights_in_ddr:
                    settings["weights_in_ddr"] = True
            settings["io_type"] = unit.io_type.removeprefix("io_")  # as config files spell it
            if unit.table_size:
                settings["table_size"] = unit.table_size
            if unit.band is not None:
                settings["band_rows"] = unit.band.rows
        for unit in (u for s in plan.subfunctions for u in s.execution_units if u.engine is not None):
            config["nodes"].setdefault(unit.nodes[0], {})["strategy"] = "engine"  # the engine has no other setting
        config["nodes"] = {node: config["nodes"][node] for node in sorted(config["nodes"])}
    print(config_yaml(config, f"hetdeploy {__version__} build configuration of {args.build_dir}"
                              f"{' with its folding pinned' if args.folding else ''}\n"
                              f"replay: hetdeploy build --config FILE -o DIR"), end="")
    return 0


def _build(args: argparse.Namespace) -> int:
    from ..steps.build import build

    if args.quiet and args.verbose:
        args.command_parser.error("-q and -v: choose one")
    quiet = {"progress": lambda message: None} if args.quiet else {}  # build.log keeps the lines all the same
    plan = build(_options(args, out_dir=Path(args.output)),
                 verbose=args.verbose, from_step=args.from_step, to_step=args.to_step, **quiet)
    stopped = not (Path(args.output) / "plan.json").is_file()  # by --to-step, as its last line said
    if args.json and plan is not None:  # a stopped build's: the plan as it stood
        print(plan.to_json(), end="")
    if args.json or stopped:
        return 0
    print(build_table(plan) + open_synth_table(plan), end="")
    return 0


def _plan(args: argparse.Namespace) -> int:
    from ..steps.build import plan_stages

    notes: list[str] = []
    _, board, plan = plan_stages(_options(args, out_dir=Path(".")), lambda k, what: None, notes.append)
    for note in notes:  # once planned (a mistake stays one line), on stderr (--json's stdout stays JSON)
        print(f"note: {note}", file=sys.stderr)
    if args.json:
        print(plan.to_json(), end="")
        return 0
    print(plan_table(plan, board, args.nodes), end="")
    return 0


def _with_steps(parser: argparse.ArgumentParser, epilog: str) -> str:
    """``parser``'s help with ``epilog`` naming the build's steps (imported only when the help is shown)."""
    from ..steps.build import PLAN_STEPS, STEPS

    parser.epilog = epilog.format(planned=len(PLAN_STEPS), steps=", ".join(s.name for s in STEPS))
    return argparse.ArgumentParser.format_help(parser)


def _sweep(args: argparse.Namespace) -> int:
    from .sweep import grid, sweep

    if args.model is None:
        args.command_parser.error("the model is required (on the command line or in --config)")
    shown = not (args.quiet or args.json)  # a bar on a terminal, else a line per point
    lines = shown and not sys.stderr.isatty()
    records = sweep(Path(args.model), grid(args.boards, args.widths, args.policies, args.reuse_factors),
                    _options(args, board="", out_dir=Path(args.output)), Path(args.output),
                    build=args.build, labels=args.labels, scheduler=args.scheduler, workers=args.workers,
                    retry_failed=args.retry_failed, bar=shown and not lines,
                    progress=(lambda line: print(line, file=sys.stderr, flush=True)) if lines else None)
    if args.json:
        print(json.dumps(records, indent=1))
        return 0
    print(records)
    failed = sum(r["status"] != "ok" for r in records)
    print(f"{len(records)} points, {failed} failed; {Path(args.output) / 'results.csv'}, "
          f"{Path(args.output) / 'pareto.png'}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from ..running.report import write_report

    print(write_report(Path(args.build_dir)))
    return 0


def _emulate(args: argparse.Namespace) -> int:
    from ..core.board_runtime import Problem, check_output_path, save_outputs
    from ..running.emulate import emulate

    try:
        if args.output:
            check_output_path(args.output)  # before the emulation's work, not after it
        result = emulate(Path(args.build_dir), args.input, args.seed, args.labels, args.batch, not args.sequential,
                         args.benchmark, args.profile)
        if args.output:
            save_outputs(args.output, result.comparison.outputs)
    except Problem as problem:
        raise UserError(str(problem)) from None
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(result.table())
    return 0 if result.comparison.passed else 3


def _cache_command(args: argparse.Namespace) -> int:
    from ..core.cache import BuildCache, default_root

    cache = BuildCache(Path(args.cache) if args.cache else default_root())
    if cache.root.exists() and not cache.root.is_dir():
        raise UserError(f"{cache.root}: not a folder")
    freed = cache.clear() if args.clear else None
    entries = cache.entries()
    kinds: dict[str, dict[str, int]] = {}
    for entry in entries:
        kind = kinds.setdefault(entry.kind, {"count": 0, "bytes": 0})
        kind["count"] += 1
        kind["bytes"] += entry.bytes
    total = sum(e.bytes for e in entries)
    if args.json:
        print(json.dumps({"folder": str(cache.root), "bytes": total, "limit": cache.limit,
                          "entries": {k: kinds[k] for k in sorted(kinds)}, "freed": freed}, indent=2))
        return 0
    if freed is not None:
        print(f"cleared {cache.root}: {_size(freed)} freed")
    print(f"{cache.root}: {len(entries)} entr{'y' if len(entries) == 1 else 'ies'}, {_size(total)} of a "
          f"{_size(cache.limit)} limit")
    for kind in sorted(kinds):
        print(f"  {kind:<8} {kinds[kind]['count']:>6}  {_size(kinds[kind]['bytes']):>10}")
    return 0


def _size(count: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= scale:
            return f"{count / scale:.3g} {unit}"
    return f"{count} B"


def _boards(args: argparse.Namespace) -> int:
    from ..core.board import available_boards, load_board

    boards = [load_board(name) for name in available_boards()]
    if args.json:
        print(json.dumps([{"name": b.name, "description": b.description, "host": b.host,
                           "devices": [_device_record(d) for d in b.devices]} for b in boards], indent=2))
        return 0
    for b in boards:
        print(f"{b.name}: {b.description}")
        for d in b.devices:
            print(f"  {d.name:<10} {_device_line(d)}{'  (host)' if d.name == b.host else ''}")
    return 0


def _device_record(device) -> dict:
    """One device of `boards --json`."""
    record = {"name": device.name, "kind": device.kind, "description": device.description, "cores": device.cores,
              "clock_mhz": device.clock_mhz or None, "memory_bytes": device.memory.bytes,
              "memory_bandwidth_bytes_per_s": device.memory.bandwidth_bytes_per_s}
    if device.compute is not None:
        record["peak_ops_per_s"] = device.compute.peak_ops_per_s
    if device.kind == "fpga":
        record.update(part=device.part, hls_tool=device.hls_tool, resources=device.resources,
                      reserve_fraction=device.reserve_fraction)
    return record


def _device_line(device) -> str:
    """One device of `boards`: an FPGA's part, clock and resources; a CPU's or GPU's own description
    and peak arithmetic; the memory it works in."""
    memory = f"{device.memory.bytes / 2**30:.3g} GiB at {device.memory.bandwidth_bytes_per_s / 1e9:.3g} GB/s"
    if device.kind == "fpga":
        return (f"fpga, {device.part} at {device.clock_mhz:g} MHz ({device.hls_tool}): " +
                ", ".join(f"{v:,} {k.upper()}" for k, v in device.resources.items()) + f"; DDR {memory}")
    peak = device.compute.peak_ops_per_s[device.compute.dtype] if device.compute else 0.0
    figure = f"{peak / 1e12:.3g} Top/s" if peak >= 1e12 else f"{peak / 1e9:.3g} Gop/s"
    return f"{device.kind}, {device.description}; {figure} {device.compute.dtype} peak; {memory}" if peak else \
        f"{device.kind}, {device.description}; {memory}"


# The sections of every command's --help, in this order (argparse leaves out an empty one).
# What the file system says when it refuses a build's or a command's writes or reads: one line, exit 2
FILE_SYSTEM_REFUSALS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.ENAMETOOLONG, errno.EACCES, errno.EPERM,
                        errno.EFBIG, errno.EMFILE, errno.ENFILE, errno.EIO, errno.ELOOP, errno.ENOTDIR,
                        errno.EISDIR, errno.EEXIST, errno.EXDEV, errno.ENOTEMPTY, errno.EBUSY}

_SECTIONS = ("what to deploy", "the sweep's grid", "partitioning", "precision and verification",
             "folding and memory", "building", "what it prints")


def _sections(command: argparse.ArgumentParser) -> dict[str, argparse._ArgumentGroup]:
    """``command``'s --help sections, made once in _SECTIONS' order so that the same option sits in
    the same place in every command."""
    if not hasattr(command, "sections"):
        command.sections = {title: command.add_argument_group(title) for title in _SECTIONS}
    return command.sections


def _add_options(command: argparse.ArgumentParser, scopes: tuple[str, ...]) -> None:
    """The options of ``config.OPTIONS`` whose scope is one of ``scopes``, each in its --help section in
    ``OPTIONS``' order: the model first (positional), then --config."""
    section = _sections(command)
    for option in (o for o in config.OPTIONS if o.scope in scopes):
        where = section[option.section]
        if option.field == "model":
            where.add_argument("model", metavar=option.metavar, nargs="?", help=option.help)
            where.add_argument("--config", metavar="FILE.yaml",
                               help="options from a YAML file (as 'hetdeploy config DIR' writes; per-node settings "
                                    "under 'nodes:'); options given here override it")
        elif option.per_node:
            value = {} if option.listed else {"type": _node_setting(option.check, option.metavar)}
            where.add_argument(option.flag, metavar=option.metavar, action="append", default=[], help=option.help,
                               **value)
        elif option.check is config.flag:
            where.add_argument(option.flag, action="store_true", help=option.help)
        elif option.choices:
            where.add_argument(option.flag, choices=option.choices, default=_default(option), help=option.help)
        else:  # no default here: --board is required once --config is read (_with_config), --cache is _cache's
            default = _default(option)
            where.add_argument(option.flag, type=None if option.check is config.text else _argument(option.check),
                               default=None if default is MISSING else default, metavar=option.metavar,
                               help=option.help)
        if option.field == "cache":
            where.add_argument("--no-cache", action="store_true", help="convert and compile everything anew, keep nothing")


def _add_axes(command: argparse.ArgumentParser) -> None:
    """The sweep's grid: a list of each option a sweep varies (``Option.axis``), as R1,R2; a list of
    one an option without a default must be given; 'auto' stands for a default of None."""
    grid = _sections(command)["the sweep's grid"]
    for option in (o for o in config.OPTIONS if o.axis):
        flag, letter, default = "--" + option.axis.replace("_", "-"), option.axis[0].upper(), _default(option)
        given = {"required": True} if default is MISSING else {"default": [default]}
        check = _or_auto(option.check) if default is None else option.check
        grid.add_argument(flag, type=_listed(check), metavar=f"{letter}1,{letter}2", help=option.axis_help, **given)


def _default(option) -> Any:
    """``option``'s BuildOptions default: MISSING where it has none or it is found at run time (the
    cache's folder, by ``_cache``)."""
    from ..planning.config import BuildOptions

    return next(f.default for f in fields(BuildOptions) if f.name == option.field)


def _printing_options(command: argparse.ArgumentParser, json_help: str, quiet_help: str = "") -> None:
    """--json, and -q where the command shows progress, in the section every command prints them in."""
    printing = _sections(command)["what it prints"]
    printing.add_argument("--json", action="store_true", help=json_help)
    if quiet_help:
        printing.add_argument("-q", "--quiet", action="store_true", help=quiet_help)


def _listed(check):
    """An argparse type: comma-separated values, each checked by ``check``, none repeated."""
    def convert(text: str):
        values = []
        for item in text.split(","):
            try:
                value = check(item.strip())
            except ValueError as err:
                raise argparse.ArgumentTypeError(str(err)) from None
            if value in values:
                raise argparse.ArgumentTypeError(f"'{item.strip()}' is listed twice")
            values.append(value)
        return values
    convert.__name__ = f"list of {check.__name__}"
    return convert


def _or_auto(check):
    """A value ``check`` takes, or 'auto' (None): a reuse factor, or each unit folded to fit."""
    def convert(text: str):
        return None if text == "auto" else check(text)
    convert.__name__ = check.__name__
    return convert


def _argument(check):
    """An argparse type from one of config's value checks (the same for config files and the API)."""
    def convert(text: str):
        try:
            return check(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    convert.__name__ = check.__name__  # argparse names the type in its message
    return convert


def _node_setting(check, expected: str):
    """NODE=VALUE, VALUE checked by ``check``: (NODE, value)."""
    def convert(text: str):
        node, sep, value = text.rpartition("=")
        if not sep or not node:
            raise argparse.ArgumentTypeError(f"'{text}': expected {expected}")
        try:
            return node, check(value)
        except ValueError as err:
            raise argparse.ArgumentTypeError(f"'{text}': {err}") from None
    return convert


class OneLineParser(argparse.ArgumentParser):
    """argparse, its mistakes one line on stderr (not the usage block first) and exit 2, in the one form
    of every other refusal ("hetdeploy: error: ..."); --help still shows the usage. Its subcommands'
    parsers are of this class too."""

    def error(self, message: str):
        self.exit(2, f"hetdeploy: error: {message} ('{self.prog} --help' shows the usage)\n")


def parser() -> argparse.ArgumentParser:
    top = OneLineParser(
        prog="hetdeploy",
        description="Deploy an ONNX network onto a heterogeneous CPU/GPU/FPGA board.",
        epilog="exit codes: 0 success; 2 bad input (one line naming the file, line, key, op or node); 3 C-simulation "
               "or emulation out of tolerance; 4 build --synth without Vitis/Vivado (built, not synthesised); 1 "
               "hls4ml or g++ failed (one line naming the log) or a bug (its traceback); 130 interrupted; 143 "
               "terminated",
    )
    top.add_argument("--version", action="version", version=f"hetdeploy {__version__}")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    config_note = "MODEL.onnx and --board may instead come from --config FILE.yaml."
    b = commands.add_parser("build", help="partition, generate HLS, verify in C-simulation, write a build folder",
                            usage="%(prog)s MODEL.onnx --board BOARD -o DIR [options]",
                            description="Run every stage and write the build folder DIR (moved into place only "
                                        "when every stage passed). " + config_note)
    _add_options(b, ("point", "shared", "building", "build"))
    section = _sections(b)
    section["what to deploy"].add_argument("-o", "--output", required=True, metavar="DIR",
                                           help="required: the build folder to write")
    section["building"].add_argument(
        "--to-step", metavar="STEP", help="stop after this step (listed below): DIR then holds what the steps wrote "
        "and their checkpoint, no plan.json; go on later with --from-step")
    section["building"].add_argument(
        "--from-step", metavar="STEP", help="go on from this step in DIR, the steps before it taken from DIR's "
        "checkpoint (a finished build, or one --to-step stopped) with the same model, board and settings; the "
        "build cache makes the steps run again cheap")
    _printing_options(b, json_help="print plan.json instead of the summary table",
                      quiet_help="no progress lines (DIR/build.log keeps them)")
    section["what it prints"].add_argument(
        "-v", "--verbose", action="store_true",
        help="a line per unit converted and compiled, instead of a progress bar (a log or CI gets a line per unit "
             "anyway)")
    b.set_defaults(run=_build, command_parser=b)
    b.format_help = lambda: _with_steps(b, "steps (hetdeploy plan runs the first {planned}): {steps}")

    p = commands.add_parser("plan", help="partition a model and estimate its latency, without generating HLS",
                            usage="%(prog)s MODEL.onnx --board BOARD [options]",
                            description="Load the model and the board, cut the model into subfunctions and print "
                                        "each with its device, node count and estimated time and transfers, and "
                                        "the plan's estimated latency against all-on-CPU and the support policy. "
                                        + config_note)
    _add_options(p, ("point", "shared"))
    _printing_options(p, json_help="print the plan (plan.json's content, with 'estimate')")
    _sections(p)["what it prints"].add_argument(
        "--nodes", action="store_true",
        help="also list every node of the model with its subfunction and unit, or what intake folded it into")
    p.set_defaults(run=_plan, command_parser=p)

    e = commands.add_parser("emulate", help="run a build on this host and compare with the model on onnxruntime",
                            usage="%(prog)s DIR [options]",
                            description="CPU/GPU subfunctions on onnxruntime, FPGA subfunctions in C-simulation, "
                                        "run as the board's run.py runs them (batches of --batch samples, the "
                                        "subfunctions a pipeline of threads when there is more than one batch); "
                                        "every subfunction and output compared; exits 3 when out of tolerance.")
    e.add_argument("build_dir", metavar="DIR", help="a folder written by 'hetdeploy build'")
    e.add_argument("--input", metavar="X.npy", help="input (.npy, or .npz by input name); default: one seeded random "
                   "sample that the build neither sized nor verified on (uniform within its --calibration ranges, "
                   "else N(0, 1))")
    e.add_argument("--labels", metavar="Y.npy", help="class labels of the --input samples (whole numbers, (N,)): also "
                   "print the emulated pipeline's accuracy beside the model's (argmax of the first output)")
    e.add_argument("--seed", type=_argument(config.seed), default=0, metavar="N",
                   help="seed of the random input without --input (default 0)")
    e.add_argument("--batch", type=_argument(config.positive_int), default=1, metavar="N", help=BATCH_HELP)
    e.add_argument("--sequential", action="store_true", help=SEQUENTIAL_HELP)
    e.add_argument("--benchmark", action="store_true", help=f"{BENCHMARK_HELP} (C-simulation and this host's times, "
                   "not the board's)")
    e.add_argument("--output", metavar="Y.npy", help="save the pipeline's output here")
    e.add_argument("--profile", metavar="FILE.json", help="record what the run measured (docs/memory.md: "
                   "Profiles): each CPU/GPU node's time by onnxruntime's profiler, each FPGA call's time, the bytes of "
                   "each link; this host's figures, which 'hetdeploy plan --profile' uses for the CPU nodes")
    e.add_argument("--json", action="store_true", help="print the comparison as JSON")
    e.set_defaults(run=_emulate)

    bo = commands.add_parser("boards", help="list the board capability files: devices, CPUs, FPGA parts and "
                             "resources", description="List the shipped boards (hetdeploy/boards/*.yaml): each "
                             "device, its cores, clock, peak arithmetic and memory; an FPGA's part, HLS tool and "
                             "resources. A board of your own is a .yaml path wherever a board name goes.")
    bo.add_argument("--json", action="store_true",
                    help="print a JSON list, a board each: {name, description, host, devices (in the board's "
                         "preference order): [{name, kind, description, cores, clock_mhz, peak_ops_per_s, memory_bytes, "
                         "memory_bandwidth_bytes_per_s, part, hls_tool, resources, reserve_fraction}]} (part, "
                         "hls_tool, resources and reserve_fraction FPGA only; peak_ops_per_s a CPU's or GPU's, by "
                         "data type)")
    bo.set_defaults(run=_boards)

    r = commands.add_parser("report", help="write DIR/report.html: partition, resources and memory maps as pictures",
                            description="Draw a build's plan: the partition, each FPGA subfunction's resource "
                                        "estimates against its budget and its memory map (schedule step x address, "
                                        "on-chip memories and DDR apart). Prints the report's path.")
    r.add_argument("build_dir", metavar="DIR", help="a folder written by 'hetdeploy build'")
    r.set_defaults(run=_report)

    s = commands.add_parser("sweep", help="plan (or build and verify) a model over boards x widths x policies x "
                            "reuse factors, on Dask",
                            usage="%(prog)s MODEL.onnx --boards B1,B2 -o DIR [options]",
                            description="Evaluate every point of the grid on a Dask cluster (a local one of a worker "
                                        "per core, or --scheduler's) and write DIR/results.json, DIR/results.csv "
                                        "and DIR/pareto.png (estimated latency against LUT + DSP). A failing point "
                                        "is recorded with its error; an interrupted sweep resumes from DIR. "
                                        "MODEL.onnx may instead come from --config FILE.yaml.")
    _add_options(s, ("shared", "building"))
    _add_axes(s)
    section = _sections(s)
    section["what to deploy"].add_argument("-o", "--output", required=True, metavar="DIR",
                                           help="required: the sweep's folder")
    building = section["building"]
    building.add_argument("--build", action="store_true", help="build every point into DIR/builds and verify it "
                          "against the model (on the samples each build verified on, never those it sized on)")
    building.add_argument("--labels", metavar="Y.npy", help="with --build and --calibration: class labels of the "
                          "calibration samples; each point records its accuracy beside the model's")
    building.add_argument("--scheduler", metavar="ADDRESS", help="a running Dask scheduler (tcp://host:8786) whose "
                          "workers see the model and DIR at the same paths; default: a local cluster")
    building.add_argument("--workers", type=_argument(config.worker_count), default=None, metavar="N",
                          help="worker processes of the local cluster (default: one per core)")
    building.add_argument("--retry-failed", action="store_true", help="run again the points an earlier run "
                          "recorded as failed (recorded points are otherwise kept)")
    _printing_options(s, json_help="print the records (results.json's) instead of the table", quiet_help="no progress")
    s.set_defaults(run=_sweep, command_parser=s)

    k = commands.add_parser("cache", help="show the build cache's size and entries; --clear empties it",
                            usage="%(prog)s [--cache DIR] [--clear] [--json]",
                            description="The build cache keeps hls4ml conversions, compiled C-simulation libraries, "
                                        "reports and Yosys syntheses under a key of everything that determines "
                                        "them; past its limit (--cache-limit, $HETDEPLOY_CACHE_LIMIT, else 5G) a "
                                        "build evicts the least recently used entries.")
    k.add_argument("--cache", metavar="DIR", help="the cache folder (default: $XDG_CACHE_HOME/hetdeploy or "
                                                  "~/.cache/hetdeploy)")
    k.add_argument("--clear", action="store_true", help="remove every entry (a build running now rebuilds what it "
                                                        "loses)")
    k.add_argument("--json", action="store_true", help="print {folder, bytes, limit, entries: {kind: {count, "
                                                       "bytes}}} instead")
    k.set_defaults(run=_cache_command)

    c = commands.add_parser("config", help="print a build's configuration as YAML, for 'build --config'",
                            description="Print the resolved configuration a build folder was made with (every "
                                        "option, defaults included, per-node settings under 'nodes:') as the YAML "
                                        "file 'hetdeploy build --config FILE' reads: save it, edit it, replay it.")
    c.add_argument("build_dir", metavar="DIR", help="a folder written by 'hetdeploy build'")
    c.add_argument("--folding", action="store_true",
                   help="also pin every hls4ml unit's chosen reuse factor, strategy and weight placement (a "
                        "multiply-accumulate unit's), io type, table size and band rows under 'nodes:' (keyed by the "
                        "unit's first node), to edit the folding")
    c.set_defaults(run=_config)
    return top


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    top = parser()
    args = top.parse_args(argv)
    try:
        with processes.sigterm_as_interrupt():
            args = _with_config(top, args, argv)
            return args.run(args)
    except UserError as err:
        print(f"hetdeploy: error: {err}", file=sys.stderr)
        return err.exit_code
    except processes.Terminated:  # SIGTERM: children killed, nothing half-built left
        print("hetdeploy: terminated", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("hetdeploy: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (| head): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as err:
        if err.errno not in FILE_SYSTEM_REFUSALS:  # a file of hetdeploy's own gone missing is hetdeploy's bug
            raise
        where = f"{err.filename}: " if err.filename else ""
        print(f"hetdeploy: error: {where}{err.strerror or err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
