"""``hetdeploy sweep``: a model planned (with ``--build``: built and verified) at every point of a grid
of boards x widths x policies x reuse factors, the points spread over a Dask cluster.

    hetdeploy sweep model.onnx --boards pynq-z2,zcu104 --widths 8,16 --policies latency,support -o sweep/

Each point is one call of ``evaluate`` on a Dask worker: a local cluster of one worker process per
core by default, or the running cluster whose scheduler ``--scheduler ADDRESS`` names (its workers
must see the model, the board files and, with ``--build``, DIR at the same paths). A point's record
holds its axes, its estimated latency and FPGA resources, with ``--build`` its verified error (and
accuracy with ``--labels``), or the one-line error it failed with; a failing point never stops the
sweep. Records hold no timing or host name, so the same sweep gives the same records on any cluster.

DIR/results.json (a list of records, in grid order) and DIR/results.csv are rewritten after every
point, so an interrupted sweep resumes from them: a point already recorded is not run again (a
failed one only with ``--retry-failed``). DIR/sweep.json records what the records depend on (the
model's bytes, every option but the axes); a sweep that differs is refused rather than mixed in.
DIR/pareto.png draws estimated latency against LUT + DSP: colour the board, shape the policy, size the width.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import hashlib
import io
import itertools
import json
import logging
import os
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional

from ..core.errors import UserError, first_line
from ..core.names import identifier
from ..core.plan import duration, time_unit
from ..planning import config
from ..planning.config import BuildOptions

RESULTS_JSON = "results.json"
RESULTS_CSV = "results.csv"
PARETO_PNG = "pareto.png"
SWEEP_JSON = "sweep.json"
WORKER_WAIT_S = 60  # how long a sweep waits for a running cluster's first worker
BUILDS = "builds"  # DIR/builds/<point>: each point's build folder (--build)
RESOURCES = ("dsp", "bram18", "lut", "ff")
# results.csv's columns: the axes, then the figures (fpga_resources summed over the board's FPGAs)
COLUMNS = ("board", "width", "policy", "reuse_factor", "status", "latency_s", "all_cpu_latency_s",
           "throughput_per_s", "subfunctions",
           "fpga_nodes", "devices", *RESOURCES, "max_abs_error", "tolerance", "verified", "accuracy",
           "model_accuracy", "build_dir", "error")
# the options the grid sets per point (their config keys); everything else is the sweep's (and its
# identity, for resuming)
_AXES_OPTIONS = tuple(o.key for o in config.OPTIONS if o.axis)


@dataclass(frozen=True)
class Point:
    board: str
    width: int
    policy: str
    reuse_factor: Optional[int]  # every foldable unit's (--model-reuse-factor); None: each folded to fit

    @property
    def key(self) -> tuple:
        return self.board, self.width, self.policy, self.reuse_factor

    def folder(self) -> str:
        return identifier(f"{Path(self.board).stem}_w{self.width}_{self.policy}_rf{self.reuse_factor or 'auto'}",
                          prefix="p")

    def describe(self) -> str:
        return f"{self.board} width {self.width} {self.policy} reuse factor {self.reuse_factor or 'auto'}"


def grid(boards: Iterable[str], widths: Iterable[int], policies: Iterable[str],
         reuse_factors: Iterable[Optional[int]]) -> list[Point]:
    """Every combination, boards outermost; a board file by its absolute path (workers start elsewhere)."""
    from ..core.board import is_board_file

    boards = [str(Path(b).resolve()) if is_board_file(b) else b for b in boards]
    return [Point(*axes) for axes in itertools.product(boards, widths, policies, reuse_factors)]


# ------------------------------------------------------------------ one point (on a Dask worker)

def evaluate(point: Point, base: BuildOptions, builds: Optional[str], labels: Optional[str]) -> dict:
    """``point``'s record: plan it (``builds``: build it into ``builds/<point>`` and emulate it against
    the model on the samples the build verified on, which it did not size on). Never raises: a failure
    is recorded with its one line (and the traceback when it is a bug of hetdeploy's)."""
    from ..steps.build import build, plan_stages
    from ..running.samples import build_samples
    from ..running.emulate import emulate_samples, load_build
    from ..running.samples import load_labels

    record = {"board": point.board, "width": point.width, "policy": point.policy,
              "reuse_factor": point.reuse_factor, "status": "ok", "error": None}
    out_dir = Path(builds) / point.folder() if builds else Path(".")
    options = dataclasses.replace(base, board=point.board, width=point.width, policy=point.policy,
                                  model_reuse_factor=point.reuse_factor, out_dir=out_dir)
    try:
        if builds is None:
            _, _, plan = plan_stages(options, lambda k, what: None)
        else:
            plan = build(options, progress=lambda message: None)
        record.update(plan_figures(plan))
        if builds is not None:  # on what the build verified on, never on what it sized on
            samples = build_samples(options, plan.inputs)
            held_labels = (load_labels(labels).reshape(-1, plan.inputs[0].shape[0])[samples.held_out].reshape(-1)
                           if labels else None)
            result = emulate_samples(out_dir, load_build(out_dir), samples.verification, held_labels, [])
            c = result.comparison
            record.update(max_abs_error=c.max_abs_error, tolerance=c.tolerance, verified=c.passed,
                          build_dir=str(Path(BUILDS) / point.folder()))
            if result.accuracy is not None:
                record.update(accuracy=result.accuracy.emulated, model_accuracy=result.accuracy.model)
    except UserError as err:
        record.update(status="failed", error=str(err))
    except Exception as err:  # a bug: recorded with its traceback, and the sweep goes on
        record.update(status="failed", error=f"internal error: {type(err).__name__}: {first_line(err)}",
                      traceback=traceback.format_exc())
    return record


def plan_figures(plan) -> dict:
    """What a record says of a plan: latency, throughput (a stream of the sweep's --batch), devices used,
    FPGA resources (per FPGA and summed)."""
    used = {device: dataclasses.asdict(r) for device, r in plan.fpga_resources.items()}
    return {
        "latency_s": plan.estimate.latency_s,
        "all_cpu_latency_s": plan.estimate.all_cpu_latency_s,
        "throughput_per_s": plan.estimate.throughput_per_s,
        "subfunctions": len(plan.subfunctions),
        "fpga_nodes": sum(len(s.nodes) for s in plan.subfunctions if s.kind == "fpga"),
        "devices": sorted({s.device for s in plan.subfunctions}),
        "fpga_resources": {d: {"used": r["used"], "budget": r["budget"]} for d, r in used.items()},
        **{k: sum(r["used"].get(k, 0) for r in used.values()) for k in RESOURCES},
    }


# ------------------------------------------------------------------ the sweep

class SweepTable(list):
    """The records of a sweep's points, in grid order (``pandas.DataFrame(table)`` makes a frame of
    it); ``str``: the table ``hetdeploy sweep`` prints."""

    def __str__(self) -> str:
        return table(self)

    def _repr_html_(self) -> str:
        from html import escape

        return f"<pre>{escape(table(self))}</pre>"


def sweep(model: Path, points: list[Point], base: BuildOptions, output: Path, build: bool = False,
          labels: Optional[str] = None, scheduler: Optional[str] = None, workers: Optional[int] = None,
          retry_failed: bool = False, progress: Optional[Callable[[str], None]] = None,
          bar: bool = False) -> SweepTable:
    """Every point of ``points`` evaluated on Dask (a local cluster of ``workers`` processes, else the
    one at ``scheduler``), recorded in ``output``; the records of ``points``, in their order.
    ``progress``: gets a line per point done; ``bar``: a progress bar instead (on a terminal)."""
    from ..core.output import check_output, output_lock

    model, output = Path(model).resolve(), Path(output)
    base = _checked_base(model, points, base, build, labels)
    check_output(output, (SWEEP_JSON,), "sweep")
    with output_lock(output, "sweep"):
        output.mkdir(parents=True, exist_ok=True)
        _claim(output, _identity(model, base, build, labels))
        records = {_key(r): r for r in _load_records(output)}
        todo = [p for p in points if p.key not in records
                or (retry_failed and records[p.key]["status"] != "ok")]
        if build:
            _clear_interrupted_builds(output / BUILDS)
        if todo:
            builds = str((output / BUILDS).resolve()) if build else None
            for record in _run(todo, base, builds, labels, scheduler, workers, progress, bar):
                records[_key(record)] = record
                _write_records(output, records.values(), points)
        _write_records(output, records.values(), points)
        (output / PARETO_PNG).write_bytes(pareto_png(list(records.values()), model.name))
    return SweepTable(records[p.key] for p in points)


def _checked_base(model: Path, points: list[Point], base: BuildOptions, build: bool,
                  labels: Optional[str]) -> BuildOptions:
    """The options every point shares, checked here once (a mistake is one line before any work);
    each board loaded once, and a board file named by its absolute path (for workers elsewhere)."""
    from ..core.board import load_board
    from ..intake.model import load_model

    if not points:
        raise UserError("the sweep has no points: give at least one board, width and policy")
    if labels and not (build and base.calibration):
        raise UserError("--labels needs --build and --calibration: the labels are of the calibration samples")
    if labels and base.verify_input:
        raise UserError("--labels: the labels are of the calibration samples, and with --verify-input a build "
                        "verifies on others")

    for point in points:
        for check, value, name in ((config.width, point.width, "width"),
                                   (config.choice(config.POLICIES), point.policy, "policy")):
            try:
                check(value)
            except ValueError as err:
                raise UserError(f"sweep {name}: {err}") from None
        if point.reuse_factor is not None:
            try:
                config.positive_int(point.reuse_factor)
            except ValueError as err:
                raise UserError(f"sweep reuse factor: {err}") from None
    for board in sorted({p.board for p in points}):
        load_board(board)
    base = dataclasses.replace(base, model=model,
                               calibration=Path(base.calibration).resolve() if base.calibration else None,
                               verify_input=Path(base.verify_input).resolve() if base.verify_input else None)
    config.settle_options(dataclasses.replace(base, board=points[0].board))
    loaded = load_model(model)
    if labels:
        from ..running.samples import load_labels, load_samples

        given = len(load_samples(base.calibration, loaded.inputs)) * loaded.inputs[0].shape[0]
        count = len(load_labels(labels))
        if count != given:
            raise UserError(f"{labels}: {count} labels for the {given} samples of {base.calibration}")
    return base


def _identity(model: Path, base: BuildOptions, build: bool, labels: Optional[str]) -> dict:
    """What every record depends on besides its point: the sweep in DIR/sweep.json."""
    options = {k: v for k, v in config.resolved_config(base).items()
               if k not in (*_AXES_OPTIONS, "cache", "cache_limit")}
    return {"model": str(model), "model_sha256": hashlib.sha256(model.read_bytes()).hexdigest(),
            "options": options, "build": build,
            "labels_sha256": hashlib.sha256(Path(labels).read_bytes()).hexdigest() if labels else None}


def _claim(output: Path, identity: dict) -> None:
    """DIR/sweep.json: written by the first run; a later run must be the same sweep (the grid may grow)."""
    path = output / SWEEP_JSON
    if path.exists():
        try:
            recorded = json.loads(path.read_text())
        except (OSError, ValueError):
            raise UserError(f"{path}: not a sweep record hetdeploy wrote; remove {output} or choose another -o")
        if recorded != identity:
            differing = sorted(k for k in identity if not isinstance(recorded, dict) or recorded.get(k) != identity[k])
            if differing == ["options"] and isinstance(recorded["options"], dict):
                differing = sorted(f"option {k}" for k in identity["options"]
                                   if recorded["options"].get(k) != identity["options"][k])
            raise UserError(f"{output}: holds another sweep (it differs in {', '.join(differing) or 'its record'}); "
                            f"choose another -o, or remove it to start again")
        return
    _write_atomically(path, json.dumps(identity, indent=1, sort_keys=True) + "\n")


def _clear_interrupted_builds(builds: Path) -> None:
    """The staging folders of builds an interrupted sweep's workers left (a worker ended by its
    cluster cannot clean up after itself); a build still running holds its lock and is left alone."""
    import shutil

    from ..core.output import output_lock

    for partial in sorted(builds.glob(".*.partial-*")):
        name = partial.name[1:partial.name.rindex(".partial-")]
        try:
            with output_lock(builds / name):
                shutil.rmtree(partial, ignore_errors=True)
        except UserError:  # its build is running
            continue


def _key(record: dict) -> tuple:
    return record["board"], record["width"], record["policy"], record["reuse_factor"]


def _load_records(output: Path) -> list[dict]:
    """The records an earlier run of this sweep left (none: none)."""
    path = output / RESULTS_JSON
    if not path.exists():
        return []
    try:
        records = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise UserError(f"{path}: unreadable ({first_line(err)}); remove it to run every point again") from None
    axes = {"board": str, "width": int, "policy": str, "status": str}
    if not isinstance(records, list) or not all(
            isinstance(r, dict) and all(isinstance(r.get(k), t) for k, t in axes.items())
            and (r.get("reuse_factor") is None or isinstance(r["reuse_factor"], int)) for r in records):
        raise UserError(f"{path}: not a list of sweep records hetdeploy wrote; remove it to run every point again")
    return records


def _write_records(output: Path, records: Iterable[dict], points: list[Point]) -> None:
    """results.json and results.csv: the grid's points in grid order, then earlier points beyond it."""
    order = {p.key: k for k, p in enumerate(points)}
    ordered = sorted(records, key=lambda r: (order.get(_key(r), len(order)), json.dumps(_key(r))))
    _write_atomically(output / RESULTS_JSON, json.dumps(ordered, indent=1, allow_nan=False) + "\n")
    text = io.StringIO()
    writer = csv.DictWriter(text, COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for record in ordered:
        writer.writerow({k: " ".join(v) if isinstance(v, list) else v for k, v in record.items()})
    _write_atomically(output / RESULTS_CSV, text.getvalue())


def _write_atomically(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text)
    os.replace(partial, path)


def _run(todo: list[Point], base: BuildOptions, builds: Optional[str], labels: Optional[str],
         scheduler: Optional[str], workers: Optional[int], progress, bar: bool) -> Iterable[dict]:
    """The records of ``todo``, as the cluster finishes them."""
    from distributed import as_completed
    from tqdm import tqdm

    with _client(scheduler, workers) as client, contextlib.ExitStack() as stack:
        ticker = stack.enter_context(tqdm(total=len(todo), desc="sweep", unit="point", disable=None if bar else True,
                                          dynamic_ncols=True))
        futures = {client.submit(evaluate, p, base, builds, labels, pure=False, key=f"hetdeploy-{p.folder()}"): p
                   for p in todo}
        for done, future in enumerate(as_completed(futures), 1):
            point = futures[future]
            try:
                record = future.result()
            except Exception as err:  # the worker died or could not run hetdeploy: the point failed
                record = {"board": point.board, "width": point.width, "policy": point.policy,
                          "reuse_factor": point.reuse_factor, "status": "failed",
                          "error": f"the Dask worker running it failed: {type(err).__name__}: {first_line(err)}"}
            ticker.update()
            if progress:
                outcome = "ok" if record["status"] == "ok" else f"failed: {record['error']}"
                progress(f"[{done}/{len(todo)}] {point.describe()}: {outcome}")
            yield record


@contextlib.contextmanager
def _main_not_run_again() -> Iterator[None]:
    """While the local cluster's worker processes start: multiprocessing's spawn, which Dask uses, runs the
    caller's script again in each (as ``__mp_main__``), so a script without an ``if __name__ ==
    "__main__":`` guard would plan, build and sweep again in every worker, and a script read from standard
    input ('<stdin>') cannot be found at all. The workers need only hetdeploy, so the script's path is
    hidden from spawn while they start (a module run with ``python -m`` is imported by name, as before)."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or path is None or getattr(main, "__spec__", None) is not None:
        yield
        return
    del main.__file__
    try:
        yield
    finally:
        main.__file__ = path


@contextlib.contextmanager
def _client(scheduler: Optional[str], workers: Optional[int]) -> Iterator:
    """A Dask client of the cluster at ``scheduler``, else of a local cluster of ``workers`` processes
    (one per core by default, one thread each: a point's g++ and onnxruntime use the core)."""
    from distributed import Client, LocalCluster

    if scheduler is None:
        # on this host only; the dashboard on a free port (its default one may be another cluster's)
        with _main_not_run_again():
            cluster = LocalCluster(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1, processes=True,
                                   host="127.0.0.1", dashboard_address=":0", silence_logs=logging.ERROR)
        with cluster, Client(cluster) as client:
            yield client
        return
    try:
        client = Client(scheduler, timeout="10s")
    except (OSError, TimeoutError, ValueError) as err:
        raise UserError(f"--scheduler {scheduler}: no Dask scheduler answers there ({first_line(err)})") from None
    with client:
        try:  # a scheduler without workers would leave the sweep waiting forever
            client.wait_for_workers(1, timeout=WORKER_WAIT_S)
        except TimeoutError:
            raise UserError(f"--scheduler {scheduler}: no worker joined that scheduler in {WORKER_WAIT_S} s; "
                            f"start some (dask worker {scheduler})") from None
        yield client


# ------------------------------------------------------------------ what it shows

def table(records: list[dict]) -> str:
    """A row per point: its axes, its estimate and resources, with a build its verified error."""
    lines = [f"{'board':<14} {'width':>5} {'policy':<8} {'RF':>5} {'latency':>10} {'DSP':>6} {'LUT':>8} "
             f"{'BRAM18':>6} {'FF':>8}  result"]
    for r in records:
        head = f"{Path(r['board']).stem[:14]:<14} {r['width']:>5} {r['policy']:<8} {r['reuse_factor'] or 'auto':>5}"
        if r["status"] != "ok":
            lines.append(f"{head} {'':>10} {'':>6} {'':>8} {'':>6} {'':>8}  failed: {r['error']}")
            continue
        result = "planned"
        if "verified" in r:
            result = (f"error {r['max_abs_error']:.3g} (tolerance {r['tolerance']:.3g}) "
                      f"{'verified' if r['verified'] else 'OUT OF TOLERANCE'}")
            if r.get("accuracy") is not None:
                result += f", accuracy {100 * r['accuracy']:.2f} % (model {100 * r['model_accuracy']:.2f} %)"
        lines.append(f"{head} {duration(r['latency_s']):>10} {r['dsp']:>6} {r['lut']:>8} {r['bram18']:>6} "
                     f"{r['ff']:>8}  {result}")
    return "\n".join(lines)


def pareto_png(records: list[dict], title: str) -> bytes:
    buffer = io.BytesIO()
    pareto_figure(records, title).savefig(buffer, format="png", dpi=110, metadata={"Software": None},
                                          bbox_inches="tight")
    return buffer.getvalue()


def pareto_figure(records: list[dict], title: str):
    """Estimated latency against LUT + DSP of every planned point with the Pareto front (no point both
    faster and smaller) drawn through: colour the board, shape the policy (the latency policy
    filled, the support policy a ring around it, so that a point both plan alike shows both), size the
    width; latency in the unit it reads best in, the legends outside the points."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter

    ok = [r for r in records if r["status"] == "ok"]
    figure = Figure(figsize=(8.5, 4.8))
    axes = figure.subplots()
    boards = sorted({r["board"] for r in ok})
    policies = sorted({r["policy"] for r in ok})
    widths = sorted({r["width"] for r in ok})
    unit, scale = time_unit(min((r["latency_s"] for r in ok), default=1e-3))
    markers, sizes = "os^Dvp*", {w: 28 + 90 * k / max(1, len(widths) - 1) for k, w in enumerate(widths)}
    hollow = {p: k % 2 == 1 for k, p in enumerate(policies)}
    for k, board in enumerate(boards):
        for m, policy in enumerate(policies):
            mine = [r for r in ok if r["board"] == board and r["policy"] == policy]
            if mine:
                colour = f"C{k % 10}"
                axes.scatter([r["lut"] + r["dsp"] for r in mine], [r["latency_s"] / scale for r in mine],
                             s=[(sizes[r["width"]] * (2.2 if hollow[policy] else 1)) for r in mine],
                             marker=markers[m % len(markers)], facecolors="none" if hollow[policy] else colour,
                             edgecolors=colour, linewidths=1.4 if hollow[policy] else 0.5,
                             zorder=2 if hollow[policy] else 3)
    front, best = [], float("inf")
    for r in sorted(ok, key=lambda r: (r["lut"] + r["dsp"], r["latency_s"])):
        if r["latency_s"] < best:
            front.append(r)
            best = r["latency_s"]
    if len(front) > 1:
        axes.step([r["lut"] + r["dsp"] for r in front], [r["latency_s"] / scale for r in front], where="post",
                  color="grey", linestyle="--", linewidth=1)
    axes.set_yscale("log")
    plain = FuncFormatter(lambda value, _: f"{value:g}")  # 2.75, not 2.75x10^0
    axes.yaxis.set_major_formatter(plain)
    axes.yaxis.set_minor_formatter(plain)
    axes.tick_params(axis="y", which="minor", labelsize=7)
    axes.set_xlabel("LUT + DSP (estimated, summed over the board's FPGAs)")
    axes.set_ylabel(f"estimated latency per sample ({unit})")
    failed = len(records) - len(ok)
    axes.set_title(f"{title}: {len(ok)} points planned{f', {failed} failed' if failed else ''}".replace("$", r"\$"))
    axes.grid(True, which="both", alpha=0.3)
    if ok:
        key = [Line2D([], [], ls="", marker="s", color=f"C{k % 10}", label=Path(b).stem.replace("$", r"\$"))
               for k, b in enumerate(boards)]
        key += [Line2D([], [], ls="", marker=markers[m % len(markers)], markersize=8 if hollow[p] else 6,
                       markerfacecolor="none" if hollow[p] else "grey", markeredgecolor="grey",
                       label=f"{p} policy") for m, p in enumerate(policies)]
        key += [Line2D([], [], ls="", marker="o", color="grey", markersize=sizes[w] ** 0.5, label=f"{w} bits")
                for w in widths]
        if len(front) > 1:
            key.append(Line2D([], [], color="grey", ls="--", lw=1, label="Pareto front"))
        axes.legend(handles=key, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return figure
