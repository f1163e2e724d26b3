"""Input samples: the user's .npy/.npz files, or seeded random ones; the split of a build's samples
into those that size its fixed-point types and those it verifies on, which never overlap."""

from __future__ import annotations

import dataclasses
import math
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..core.errors import UserError, first_line, input_file
from ..core.plan import Calibration, TensorSpec

if TYPE_CHECKING:
    from ..planning.config import BuildOptions


# Random streams drawn from one --seed: the sizing samples are stream 0 (``default_rng(seed)``, as
# they always were); the others are seeded by (seed, stream), which numpy's SeedSequence keeps apart
# from every plain seed, so a build never verifies on, nor emulates by default, what it sized on.
SIZING, VERIFICATION, EMULATION, HOLD_OUT, FLIPS = 0, 1, 2, 3, 4


def _generator(seed: int, stream: int) -> np.random.Generator:
    return np.random.default_rng(seed if stream == SIZING else [seed, stream])


def random_samples(specs: list[TensorSpec], count: int, seed: int, stream: int = SIZING
                   ) -> list[dict[str, np.ndarray]]:
    """N(0, 1) for floating-point inputs; 0 or 1 for integer and boolean ones (indices valid on any
    axis of two or more, which is all a random sample can promise); ``stream``: which of --seed's
    streams (SIZING, VERIFICATION, EMULATION)."""
    rng = _generator(seed, stream)

    def sample(spec: TensorSpec) -> np.ndarray:
        if spec.dtype.startswith("float"):
            return rng.standard_normal(spec.shape).astype(spec.dtype)
        return rng.integers(0, 2, spec.shape).astype(spec.dtype)

    return [{s.name: sample(s) for s in specs} for _ in range(count)]


def uniform_samples(specs: list[TensorSpec], count: int, ranges: dict[str, list[float]], seed: int,
                    stream: int = EMULATION) -> list[dict[str, np.ndarray]]:
    """Uniform samples within each input's ``ranges`` ([least, largest], a build's calibration
    ranges): inputs of the kind a build sized its types on, none of them its own (integer inputs:
    whole numbers in the range)."""
    rng = _generator(seed, stream)

    def sample(spec: TensorSpec) -> np.ndarray:
        low, high = ranges[spec.name]
        if spec.dtype.startswith("float"):
            return rng.uniform(low, high, spec.shape).astype(spec.dtype)
        return rng.integers(math.ceil(low), math.floor(high) + 1, spec.shape).astype(spec.dtype)

    return [{s.name: sample(s) for s in specs} for _ in range(count)]


def edge_sample(sample: dict[str, np.ndarray], ranges: dict[str, list[float]]) -> dict[str, np.ndarray]:
    """``sample`` stretched onto the edges of the ranges the types were sized for: each floating-point
    input mapped affinely so that its least value is the range's least and its largest the range's
    largest (a constant input: the larger edge); integer inputs as they are."""
    edged = {}
    for name, x in sample.items():
        low, high = ranges[name]
        if x.dtype.kind != "f":
            edged[name] = x
            continue
        least, most = float(np.min(x)), float(np.max(x))
        stretched = low + (x.astype(np.float64) - least) * ((high - low) / (most - least)) if most > least else \
            np.full(x.shape, high if abs(high) >= abs(low) else low)
        edged[name] = np.clip(stretched, low, high).astype(x.dtype)  # the ends exactly on the edges
    return edged


def input_ranges(samples: list[dict[str, np.ndarray]]) -> dict[str, list[float]]:
    """Each input's [least, largest] value over ``samples``."""
    return {name: [float(min(np.min(s[name]) for s in samples)), float(max(np.max(s[name]) for s in samples))]
            for name in samples[0]}


def hold_out(samples: list[dict[str, np.ndarray]], seed: int) -> tuple[list[dict[str, np.ndarray]], list[int]]:
    """The user's calibration samples split in two: those that size the types and the indices of a
    quarter of them (at least one, chosen by a seeded shuffle: a file sorted by class gives every
    class its chance) held out for verification, which sizing never sees."""
    count = max(1, len(samples) // 4)
    held = sorted(int(i) for i in _generator(seed, HOLD_OUT).permutation(len(samples))[:count])
    kept = set(range(len(samples))) - set(held)
    return [s for i, s in enumerate(samples) if i in kept], held


def load_samples(path: str | Path, specs: list[TensorSpec]) -> list[dict[str, np.ndarray]]:
    """A .npy (models with one input) or .npz (arrays named after the inputs).

    Each array is either exactly the input's shape (one sample) or a stack of
    samples along the batch axis: (N, ...) for an input of shape (1, ...).
    """
    path = Path(path)
    return split_samples(_load(path, "input"), specs, str(path))


def split_samples(arrays: np.ndarray | dict[str, np.ndarray], specs: list[TensorSpec],
                  source: str = "input") -> list[dict[str, np.ndarray]]:
    """Arrays (one for a one-input model, else by input name), each one sample or N stacked on the
    batch axis, as one feed per sample; ``source`` names them in errors."""
    path = source
    if not isinstance(arrays, dict):
        if len(specs) != 1:
            raise UserError(f"{path}: the model has {len(specs)} inputs; give arrays named "
                            f"{', '.join(s.name for s in specs)}")
        arrays = {specs[0].name: np.asarray(arrays)}
    else:
        arrays = {k: np.asarray(v) for k, v in arrays.items()}
        missing = [s.name for s in specs if s.name not in arrays]
        if missing:
            raise UserError(f"{path}: no array named '{missing[0]}' (the model's inputs: "
                            f"{', '.join(s.name for s in specs)})")
    counts = set()
    for s in specs:
        a = arrays[s.name]
        if a.dtype.kind not in "fiub":
            raise UserError(f"{path}: input '{s.name}' has dtype {a.dtype}, expected numbers")
        if list(a.shape[1:]) != s.shape[1:] or a.ndim != len(s.shape):
            raise UserError(f"{path}: input '{s.name}' has shape {list(a.shape)}, the model takes {s.shape} "
                            f"(or N samples stacked on axis 0)")
        counts.add(a.shape[0])
    if len(counts) != 1:
        raise UserError(f"{path}: the inputs hold different numbers of samples {sorted(counts)}")
    batch = specs[0].shape[0]
    n = counts.pop()
    if n == 0:
        raise UserError(f"{path}: holds no samples (0 on axis 0)")
    if n % batch:
        raise UserError(f"{path}: {n} samples do not split into batches of {batch}")
    return [{s.name: np.ascontiguousarray(arrays[s.name][i : i + batch], dtype=s.dtype) for s in specs}
            for i in range(0, n, batch)]


def load_labels(path: str | Path) -> np.ndarray:
    """Class labels, one whole number per sample (.npy of shape (N,) or (N, 1))."""
    path = Path(path)
    labels = _load(path, "labels")
    if not isinstance(labels, np.ndarray) or labels.dtype.kind not in "iu" or labels.ndim not in (1, 2) or \
            (labels.ndim == 2 and labels.shape[1] != 1):
        raise UserError(f"{path}: expected one whole-number class label per sample, shape (N,) or (N, 1)")
    return labels.reshape(-1)


def _load(path: Path, what: str) -> np.ndarray | dict[str, np.ndarray]:
    """np.load of a .npy (an array) or .npz (its arrays by name, every one read now), its failures
    one line."""
    try:
        loaded = np.load(input_file(path, f"{what} file"), allow_pickle=False)
        if isinstance(loaded, np.lib.npyio.NpzFile):  # read every array now: a bad one fails here, in one line
            with loaded:
                return {name: loaded[name] for name in loaded.files}
        return loaded
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as err:  # object arrays, truncated, empty
        raise UserError(f"{path}: not a readable .npy/.npz file of numbers ({first_line(err)})") from None


@dataclasses.dataclass
class BuildSamples:
    """What a build sizes its fixed-point types on and what it verifies on: never the same samples."""

    sizing: list[dict[str, np.ndarray]]
    verification: list[dict[str, np.ndarray]]
    held_out: list[int]  # the --calibration samples verified on (their indices), when held out of it
    calibration: Calibration


def build_samples(options: BuildOptions, specs) -> BuildSamples:
    """--calibration's samples less a held-out quarter (``samples.hold_out``), which verification
    takes, or all of them when --verify-input gives those; without --calibration, --samples random
    ones (stream SIZING of --seed), verified on as many of another stream (VERIFICATION) and one
    stretched onto the edges of the sized ranges (``samples.edge_sample``)."""
    held: list[int] = []
    if options.calibration:
        given = load_samples(options.calibration, specs)
        name = Path(options.calibration).name
        if options.verify_input:
            sizing, verification = given, load_samples(options.verify_input, specs)
            where = f"the {len(verification)} samples of {Path(options.verify_input).name}"
        elif len(given) < 2:
            raise UserError(f"{options.calibration}: holds one sample; a build sizes its types on some samples and "
                            f"verifies on others: give two or more (a quarter are held out) or --verify-input Y.npy")
        else:
            sizing, held = hold_out(given, options.seed)
            verification = [given[i] for i in held]
            where = f"{len(held)} of the {len(given)} samples of {name}, held out (never sized on)"
        return BuildSamples(sizing, verification, held,
                            Calibration("file", len(sizing), name, input_ranges(sizing), len(verification), where))
    sizing = random_samples(specs, options.samples, options.seed)
    ranges = input_ranges(sizing)
    if options.verify_input:
        verification = load_samples(options.verify_input, specs)
        where = f"the {len(verification)} samples of {Path(options.verify_input).name}"
    else:
        verification = random_samples(specs, options.samples, options.seed, VERIFICATION)
        where = f"{len(verification)} other synthetic samples (seed {options.seed}, another stream)"
        if any(s.dtype.startswith("float") for s in specs):
            verification.append(edge_sample(verification[0], ranges))
            where += " and 1 stretched onto the edges of the sized ranges"
    return BuildSamples(sizing, verification, held,
                        Calibration("synthetic", len(sizing), "", ranges, len(verification), where))


def calibration_note(calibration: Calibration, seed: int) -> str:
    """Where the FPGA's fixed-point ranges come from, said plainly (synthetic data is a guess), and
    what the build verifies on."""
    ranges = ", ".join(f"'{name}' {low:.3g} to {high:.3g}" for name, (low, high) in calibration.input_ranges.items())
    verified = f"; verified on {calibration.verification}"
    if calibration.source == "file":
        return f"      precision sized on {calibration.samples} samples of {calibration.file}: {ranges}{verified}"
    return (f"      precision sized on {calibration.samples} SYNTHETIC N(0, 1) samples (seed {seed}), not on your "
            f"data: it assumes inputs like {ranges}; pass --calibration X.npy with real inputs{verified}")
