"""run.py of a deployment package: the plan executed on the board, or emulated on a host.

This file is copied as DIR/deploy/run.py and runs there on its own: it needs numpy and onnxruntime,
and on the board pynq; never hetdeploy, onnx or hls4ml. (hetdeploy's own emulation imports its
stream runner, ``run_stream``, from here.)

    python run.py --input X.npy --output Y.npy [--batch N] [--sequential] [--benchmark] [--emulate]
                  [--profile FILE.json] [--codes]

The samples go through in batches of N (the last one may be smaller). CPU subfunctions run on
onnxruntime (the board's ARM cores), a batch a call where plan.json marks them "batched" (their models' batch
axis open), else a sample a call. FPGA subfunctions run
on their HLS core through pynq, a batch a call: the overlay is loaded once; every port's buffers (two
sets of a batch each, and the DDR region of the memory plan) are allocated once with pynq.allocate,
the DDR weights written once and each weight port pointed at them; a call copies the batch into one
set (zero-compressing each sample of a port plan.json marks "compressed", ``to_port``, and what such an
output port gives back is decompressed, ``from_port``; an input port of "codes" takes them, ``to_codes``),
points the core at it, writes the sample
count (the ``samples`` register), starts the core (ap_start) and waits for ap_done. With more than
one batch the subfunctions run as a pipeline, a thread each: while one works on batch k the next
works on batch k - 1, and an FPGA subfunction copies
batch k + 1 into its other buffer set while its core runs batch k; the outputs are those of the
sequential run (--sequential: one batch after another through one subfunction after another).
With --emulate the FPGA subfunctions run through their C-simulation libraries
(../hls/<name>/lib<name>.so) instead. With --codes the input is the model input quantizer's integer codes
(plan.json's "codes_input": its tensors and shapes; their codes, the FPGA subfunctions' "input_codes"), as FINN's
driver takes its input: they go into the FPGA's codes port as they are, and the host subfunctions that computed
them do not run.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import platform
import queue
import shutil
import socket
import stat
import sys
import tempfile
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np

HERE = Path(__file__).resolve().parent
AP_START, AP_DONE = 0x1, 0x2
DONE_TIMEOUT_S = 5.0
POLL_S = 20e-6  # between reads of a core's ap_done


def channels_last(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(x, 1, -1)) if x.ndim >= 3 else x


def channels_first(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(x, -1, 1)) if x.ndim >= 3 else x


def stored_shape(shape: list[int], count: int = 1) -> list[int]:
    """The layout of an FPGA port holding ``count`` samples: rank >= 3 is channels-last."""
    return [count, *shape[2:], shape[1]] if len(shape) >= 3 else [count, *shape[1:]]


def _port_values(port: dict) -> int:
    """``port_values`` of a port of plan.json's "hls"."""
    return port_values(int(np.prod(port["shape"])), port.get("compressed", False), port.get("codes"))


def _to_port(port: dict, feeds: dict[str, np.ndarray]) -> np.ndarray:
    """``to_port`` of a port of plan.json's "hls" on its tensor of ``feeds``."""
    try:
        return to_port(channels_last(feeds[port["tensor"]]), port.get("compressed", False), port.get("codes"))
    except ValueError as err:
        raise ValueError(f"{port['tensor']}: {err}") from None


def ddr_image(sub: dict) -> np.ndarray:
    """The DDR weights of an FPGA subfunction, as its core reads them (bytes from the region's start)."""
    return np.fromfile(HERE / "ddr" / f"{sub['name']}.bin", dtype=np.uint8)


def per_sample(run, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``run`` (one sample's feeds -> its outputs) over every sample of ``feeds`` (axis 0), stacked."""
    count = len(next(iter(feeds.values())))
    results = [run({t: x[i:i + 1] for t, x in feeds.items()}) for i in range(count)]
    return {t: np.concatenate([r[t] for r in results]) for t in results[0]}


class CpuSubfunction:
    def __init__(self, sub: dict):
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        # exact integer kernels on an x86 host too (--emulate), as hetdeploy's ort_adapter.session_options
        options.add_session_config_entry("session.x64quantprecision", "1")
        self.session = onnxruntime.InferenceSession(str(HERE / "models" / f"{sub['name']}.onnx"), options,
                                                    providers=["CPUExecutionProvider"])
        self.outputs = [o.name for o in self.session.get_outputs()]
        self.names = [i.name for i in self.session.get_inputs()]
        self.batched = sub.get("batched", False)  # its model's batch axis is open: a batch a call

    def _run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return dict(zip(self.outputs, self.session.run(None, {n: feeds[n] for n in self.names})))

    def __call__(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self._run(feeds) if self.batched else per_sample(self._run, feeds)  # else its batch axis is 1


@dataclass
class FpgaTimings:
    """Seconds per call of an FPGA subfunction: the host copying a batch into its buffers, its core
    (ap_start to ap_done; the C-simulation's call when emulated), the host copying the results out."""

    copy_in: list = field(default_factory=list)
    core: list = field(default_factory=list)
    copy_out: list = field(default_factory=list)


class FpgaSubfunction:
    """One HLS core of the overlay, driven through its control registers (s_axilite), a batch a
    call, through two sets of port buffers: ``prepare`` fills one while the core may still run on
    the other, ``launch`` starts the core on it, ``wait`` waits for ap_done, ``collect`` reads it."""

    def __init__(self, sub: dict, overlay):
        import pynq

        self.sub = sub
        self.max_batch = sub["hls"].get("max_batch", 1)
        self.core = getattr(overlay, sub["hls"]["top"])
        ports = [(f"in_{k}", p) for k, p in enumerate(sub["hls"]["inputs"])]
        ports += [(f"out_{k}", p) for k, p in enumerate(sub["hls"]["outputs"])]
        self.sets = [{name: pynq.allocate(shape=(self.max_batch * _port_values(p),),
                                          dtype=np.uint32 if p.get("compressed") or p.get("codes") else np.float32)
                      for name, p in ports} for _ in range(2)]
        self.counts = [0, 0]  # samples in each set
        self.next = 0
        self.timings = FpgaTimings()
        self.launched = 0.0
        ddr = sub["memory"]["ddr_bytes"]
        if ddr:
            self.ddr = pynq.allocate(shape=(ddr,), dtype=np.uint8)
            self._write_address("ddr", self.ddr.physical_address)
        if sub["hls"].get("ddr_image"):  # DDR weights: written once, each array's port at its offset
            image = ddr_image(sub)
            self.ddr[: image.size] = image
            self.ddr.flush()
            for port in sub["hls"]["weight_ports"]:
                self._write_address(port["port"], self.ddr.physical_address + port["offset"])

    def _write_address(self, port: str, address: int) -> None:
        """A pointer argument's register(s), by the names the overlay's hardware handoff gives them:
        one 32-bit register, or <port>_1 (low word) and <port>_2 (high word)."""
        registers = self.core.register_map
        if hasattr(registers, f"{port}_1"):
            setattr(registers, f"{port}_1", address & 0xFFFFFFFF)
            setattr(registers, f"{port}_2", address >> 32)
        else:
            setattr(registers, port, address)

    def prepare(self, feeds: dict[str, np.ndarray]) -> int:
        """Copy a batch into the next buffer set; returns the set."""
        started = time.perf_counter()
        slot, self.next = self.next, 1 - self.next
        buffers = self.sets[slot]
        for k, port in enumerate(self.sub["hls"]["inputs"]):
            flat = _to_port(port, feeds)
            buffers[f"in_{k}"][: flat.size] = flat
            buffers[f"in_{k}"].flush()
        self.counts[slot] = len(feeds[self.sub["hls"]["inputs"][0]["tensor"]])
        self.timings.copy_in.append(time.perf_counter() - started)
        return slot

    def launch(self, slot: int) -> None:
        """Point the core at buffer set ``slot`` and start it on its samples."""
        for name, buffer in self.sets[slot].items():
            self._write_address(name, buffer.physical_address)
        self.core.register_map.samples = self.counts[slot]
        self.core.write(0x00, AP_START)
        self.launched = time.perf_counter()

    def wait(self) -> None:
        started = time.monotonic()
        while not self.core.read(0x00) & AP_DONE:
            if time.monotonic() - started > DONE_TIMEOUT_S:
                raise RuntimeError(f"{self.sub['name']}: the core did not finish in {DONE_TIMEOUT_S} s "
                                   f"(bitstream and plan from different builds?)")
            time.sleep(POLL_S)  # let the other stages' threads run
        self.timings.core.append(time.perf_counter() - self.launched)

    def collect(self, slot: int) -> dict[str, np.ndarray]:
        started = time.perf_counter()
        results, count = {}, self.counts[slot]
        for k, port in enumerate(self.sub["hls"]["outputs"]):
            buffer = self.sets[slot][f"out_{k}"]
            buffer.invalidate()
            flat = from_port(np.array(buffer[: count * _port_values(port)]), count, int(np.prod(port["shape"])),
                             port.get("compressed", False))
            results[port["tensor"]] = channels_first(flat.reshape(stored_shape(port["shape"], count)))
        self.timings.copy_out.append(time.perf_counter() - started)
        return results

    def __call__(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        slot = self.prepare(feeds)
        self.launch(slot)
        self.wait()
        return self.collect(slot)


class EmulatedFpgaSubfunction:
    """The same subfunction through its C-simulation library, on a host, a batch a call."""

    _first_calls = threading.Lock()  # the first call reads the weights relative to the working folder

    def __init__(self, sub: dict):
        self.sub = sub
        self.max_batch = sub["hls"].get("max_batch", 1)
        self.project = (HERE.parent / sub["hls"]["project"]).resolve()
        library = ctypes.CDLL(str((HERE.parent / sub["hls"]["library"]).resolve()), mode=os.RTLD_LOCAL)
        self.entry = getattr(library, f"{sub['hls']['top']}_float")
        self.entry.restype = ctypes.c_int
        self.weights_read = False
        self.timings = FpgaTimings()
        if sub["hls"].get("ddr_image"):  # DDR weights (hls4ml units' and the engine's)
            image = ddr_image(sub).tobytes()
            load = getattr(library, f"{sub['hls']['top']}_load_ddr")
            load.argtypes, load.restype = [ctypes.c_char_p, ctypes.c_int], ctypes.c_int
            if load(image, len(image)) != 0:
                raise RuntimeError(f"ddr/{sub['name']}.bin: larger than the core's DDR region")

    def __call__(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        started = time.perf_counter()
        count = len(feeds[self.sub["hls"]["inputs"][0]["tensor"]])
        arrays = [_to_port(p, feeds) for p in self.sub["hls"]["inputs"]]
        outs = [np.zeros(count * _port_values(p), dtype=np.float32) for p in self.sub["hls"]["outputs"]]
        arguments = [ctypes.c_int(count)] + [a.ctypes.data_as(ctypes.c_void_p) for a in arrays + outs]
        launched = time.perf_counter()
        self.timings.copy_in.append(launched - started)
        if self.weights_read:  # ctypes lets the other stages' threads run meanwhile
            status = self.entry(*arguments)
        else:
            with self._first_calls:  # one library at a time in its project folder (the process's)
                previous = os.getcwd()
                os.chdir(self.project)
                try:
                    status = self.entry(*arguments)
                finally:
                    os.chdir(previous)
            self.weights_read = True
        if status != 0:
            raise RuntimeError(f"{self.sub['name']}: the library refused a batch of {count} (built for at most "
                               f"{self.max_batch}; library and plan from different builds?)")
        done = time.perf_counter()
        self.timings.core.append(done - launched)
        results = {}
        for p, port in zip(self.sub["hls"]["outputs"], outs):
            flat = from_port(port, count, int(np.prod(p["shape"])), p.get("compressed", False))
            results[p["tensor"]] = channels_first(flat.reshape(stored_shape(p["shape"], count)))
        self.timings.copy_out.append(time.perf_counter() - done)
        return results


# ---------------------------------------------------------------- zero-compressed tensors
#
# A tensor crossing a link can travel zero-compressed (planning.compression weighs when it pays):
# per sample, uint32 words: the count of values kept, a bitmap (bit j % 32 of word j // 32 set: value
# j is kept) and the kept values' bits in order. A bitmap, not a run-length form: ReLU zeros are
# scattered, not in long runs, and a bitmap costs one bit a value whatever their pattern, bounds the
# size in advance (the port's buffer) and decodes a word of 32 values at a time. A value is dropped
# only where its bits are all 0 (+0.0): -0.0 and NaN keep theirs, so the round trip is exact.


def compressed_words(count: int) -> int:
    """The most words one sample of ``count`` values takes zero-compressed (none of them zero)."""
    return 1 + (count + 31) // 32 + count


def zero_compress(values: np.ndarray) -> np.ndarray:
    """One sample's values (float32) zero-compressed, as uint32 words."""
    bits = np.ascontiguousarray(values, dtype=np.float32).reshape(-1).view(np.uint32)
    kept = bits != 0
    bitmap = np.zeros((len(bits) + 31) // 32 * 4, dtype=np.uint8)
    packed = np.packbits(kept, bitorder="little")
    bitmap[: len(packed)] = packed
    return np.concatenate([np.array([np.count_nonzero(kept)], dtype=np.uint32), bitmap.view("<u4"), bits[kept]])


def zero_decompress(words: np.ndarray, count: int) -> np.ndarray:
    """``zero_compress``'s words back into the sample's ``count`` float32 values, bit for bit."""
    words = np.asarray(words, dtype=np.uint32)
    map_words = (count + 31) // 32
    kept = np.unpackbits(words[1: 1 + map_words].astype("<u4").view(np.uint8), bitorder="little")[:count].astype(bool)
    if np.count_nonzero(kept) != words[0] or len(words) < 1 + map_words + int(words[0]):
        raise RuntimeError(f"a zero-compressed sample of {count} values keeps {int(words[0])} by its count, "
                           f"{np.count_nonzero(kept)} by its bitmap, in {len(words)} words: not zero_compress's")
    values = np.zeros(count, dtype=np.uint32)
    values[kept] = words[1 + map_words: 1 + map_words + int(words[0])]
    return values.view(np.float32)


# ---------------------------------------------------------------- codes ports
#
# An FPGA input that an input quantizer on the host gives travels as its codes (plan.json's "codes": "bits" and
# "values", planning/input_codes.py): each value the index of its float32 in "values", "bits" bits, 64 // bits of
# them to a 64-bit word, value j of a sample in bits (j % (64 // bits)) * bits onwards of its word j // (64 // bits)
# (little-endian), a sample in whole words. The top converts an index's value to its fixed point as it converts a
# float (hls/arena.h's from_codes): the same values as a float port, bit for bit.


def code_words(count: int, bits: int) -> int:
    """The 64-bit words a sample of ``count`` codes of ``bits`` bits takes."""
    return -(-count * bits // 64)


def to_codes(samples: np.ndarray, codes: dict) -> np.ndarray:
    """Samples (on axis 0) as codes (uint32 words, two a 64-bit word): float32 values, each one of ``codes``'
    values, or the quantizer's integer codes themselves (``run.py --codes``); ValueError where one is neither (NaN,
    another quantizer's value, a code out of range: a port that would change it)."""
    flat = np.ascontiguousarray(samples).reshape(len(samples), -1)
    index = _indices_of_codes(flat, codes) if flat.dtype.kind in "iu" else _indices_of_values(flat, codes)
    bits, per_word = codes["bits"], 64 // codes["bits"]
    padded = np.zeros((len(flat), code_words(flat.shape[1], bits) * per_word), dtype=np.uint64)
    padded[:, : flat.shape[1]] = index
    shifts = np.arange(per_word, dtype=np.uint64) * np.uint64(bits)
    words = np.bitwise_or.reduce(padded.reshape(len(flat), -1, per_word) << shifts, axis=2)
    return np.ascontiguousarray(words.astype("<u8")).view(np.uint32).reshape(-1)


def _indices_of_values(flat: np.ndarray, codes: dict) -> np.ndarray:
    values = np.asarray(codes["values"], dtype=np.float32)
    flat = flat.astype(np.float32, copy=False)
    order = np.argsort(values, kind="stable")
    index = order[np.clip(np.searchsorted(values[order], flat), 0, len(values) - 1)]
    wrong = values[index] != flat  # -0.0 is 0.0, as the fixed point takes it; NaN is never equal
    if wrong.any():
        sample, j = (int(k) for k in np.argwhere(wrong)[0])
        raise ValueError(f"value {flat[sample, j]!r} (sample {sample}, element {j}) is not one of its quantizer's "
                         f"{len(set(codes['values']))} values: the port carries codes")
    return index


def _indices_of_codes(flat: np.ndarray, codes: dict) -> np.ndarray:
    first, step, levels = codes.get("first", 0), codes.get("step", 1), len(set(codes["values"]))
    index, off = np.divmod(flat.astype(np.int64) - first, step)
    wrong = (off != 0) | (index < 0) | (index >= levels)
    if wrong.any():
        sample, j = (int(k) for k in np.argwhere(wrong)[0])
        every = f"{first}, {first + step}" + (f" ... {first + (levels - 1) * step}" if levels > 2 else "")
        raise ValueError(f"code {int(flat[sample, j])} (sample {sample}, element {j}) is not one of its quantizer's "
                         f"codes ({every})")
    return index


def port_values(values: int, compressed: bool, codes: Optional[dict] = None) -> int:
    """The 32-bit values a sample of ``values`` values takes in an FPGA top's port: the values, zero-compressed
    the most words they can take, or as ``codes`` their 64-bit words' halves."""
    if codes is not None:
        return 2 * code_words(values, codes["bits"])
    return compressed_words(values) if compressed else values


def to_port(samples: np.ndarray, compressed: bool, codes: Optional[dict] = None) -> np.ndarray:
    """A batch's values (samples on axis 0, as the port lays them out) as the port holds them: float32, or
    (``compressed``) each sample zero-compressed into its ``compressed_words`` slot (uint32; its words past
    the encoding 0), or as ``codes`` (``to_codes``, uint32: float values, or integer codes)."""
    if codes is not None:
        return to_codes(samples, codes)
    flat = np.ascontiguousarray(samples, dtype=np.float32).reshape(len(samples), -1)
    if not compressed:
        return flat.reshape(-1)
    slots = np.zeros((len(flat), compressed_words(flat.shape[1])), dtype=np.uint32)
    for slot, sample in zip(slots, flat):
        words = zero_compress(sample)
        slot[: len(words)] = words
    return slots.reshape(-1)


def from_port(port: np.ndarray, count: int, values: int, compressed: bool) -> np.ndarray:
    """``count`` samples of ``values`` values, flat float32, from what a port holds (``to_port``'s form; a
    compressed port's words read as any 4-byte type)."""
    if not compressed:
        return np.asarray(port[: count * values], dtype=np.float32)
    slots = np.ascontiguousarray(port[: count * compressed_words(values)]).view(np.uint32).reshape(count, -1)
    return np.concatenate([zero_decompress(slot, values) for slot in slots])


# ---------------------------------------------------------------- the stream


def resource_of(kind: str, device: str, stage: str) -> str:
    """What a stage's calls occupy: on an FPGA its own core (one per subfunction), else its device."""
    return f"{device}/{stage}" if kind == "fpga" else device


@dataclass
class Stage:
    name: str
    resource: str  # resource_of its subfunction
    inputs: list  # tensor names
    run: Callable  # feeds of a batch -> its outputs


@dataclass
class StreamTimes:
    """What ``run_stream`` measured: per stage, the seconds each batch took in it (and the seconds its
    device was busy with it), end to end per batch, and the whole stream's wall time."""

    stages: dict = field(default_factory=dict)  # stage name -> [seconds per batch]
    busy: dict = field(default_factory=dict)  # stage name -> [seconds its device worked per batch]
    end_to_end: list = field(default_factory=list)
    batch_sizes: list = field(default_factory=list)
    wall_s: float = 0.0


_END = object()


def run_stream(stages: list, batches: list, pipelined: bool = True, times: Optional[StreamTimes] = None) -> list:
    """Each batch's environment (tensor -> array, samples on axis 0) through ``stages`` in order, each
    stage adding its outputs; returns the environments in batch order. ``pipelined``: a thread per
    stage, a bounded queue between stages, so the stages work on different batches at once (an
    FPGA stage double-buffered, ``_fpga_stage``); else one batch after another. The results are the
    same either way: every stage sees the same inputs."""
    times = times if times is not None else StreamTimes()
    for stage in stages:
        times.stages.setdefault(stage.name, [])
        times.busy.setdefault(stage.name, [])
    times.batch_sizes = [len(next(iter(b.values()))) for b in batches]
    began = time.perf_counter()
    entered: list = []
    if not pipelined or len(batches) < 2:
        results = []
        for env in batches:
            entered.append(time.perf_counter())
            for stage in stages:
                _run_stage(stage, env, times)
            results.append(env)
            times.end_to_end.append(time.perf_counter() - entered[-1])
    else:
        queues = [queue.Queue(maxsize=2) for _ in range(len(stages) + 1)]
        failures: list = []
        workers = [threading.Thread(target=_stage_worker, args=(stage, queues[k], queues[k + 1], times, failures),
                                    daemon=True) for k, stage in enumerate(stages)]
        for worker in workers:
            worker.start()
        results = []
        feeder = threading.Thread(target=_feed, args=(batches, queues[0], entered), daemon=True)
        feeder.start()
        while True:
            item = queues[-1].get()
            if item is _END:
                break
            results.append(item[1])
            times.end_to_end.append(time.perf_counter() - entered[item[0]])
        if failures:
            raise failures[0]
    times.wall_s = time.perf_counter() - began
    return results


def _run_stage(stage: Stage, env: dict, times: StreamTimes) -> None:
    """``stage`` on a batch's environment, its outputs added to it, its time recorded."""
    started = time.perf_counter()
    env.update(stage.run({t: env[t] for t in stage.inputs}))
    times.stages[stage.name].append(time.perf_counter() - started)
    times.busy[stage.name].append(times.stages[stage.name][-1])


def _feed(batches: list, inbox, entered: list) -> None:
    for index, env in enumerate(batches):
        entered.append(time.perf_counter())
        inbox.put((index, env))
    inbox.put(_END)


def _stage_worker(stage: Stage, inbox, outbox, times: StreamTimes, failures: list) -> None:
    """One stage of a pipelined stream; after a failure it passes nothing on but the end."""
    try:
        if hasattr(stage.run, "prepare"):
            _fpga_stage(stage, inbox, outbox, times)
        else:
            while (item := inbox.get()) is not _END:
                _run_stage(stage, item[1], times)
                outbox.put(item)
    except Exception as error:  # noqa: BLE001 - handed to the caller, which raises it
        failures.append(error)
        while inbox.get() is not _END:  # let the stages before this one finish
            pass
    outbox.put(_END)


def _fpga_stage(stage: Stage, inbox, outbox, times: StreamTimes) -> None:
    """An FPGA core double-buffered: batch k + 1 is copied into the other buffer set while the core
    runs batch k; then k is collected while k + 1 runs."""
    core = stage.run
    flight = None  # (item, slot, prepared at, launched at)
    while True:
        item = inbox.get()
        if item is not _END:
            prepared = time.perf_counter()
            slot = core.prepare({t: item[1][t] for t in stage.inputs})
        if flight is not None:
            core.wait()
            done = time.perf_counter()
        if item is not _END:
            core.launch(slot)
            launched = time.perf_counter()
        if flight is not None:
            flight[0][1].update(core.collect(flight[1]))
            times.stages[stage.name].append(time.perf_counter() - flight[2])
            times.busy[stage.name].append(done - flight[3])
            outbox.put(flight[0])
        if item is _END:
            return
        flight = (item, slot, prepared, launched)


def stream_summary(names: list, resources: list, times: StreamTimes) -> dict:
    """--benchmark's figures: per stage and end to end, the latency percentiles of a batch (ms) and
    the samples per second; per device (per core on an FPGA), the share of the stream's wall time it
    was busy."""
    samples = sum(times.batch_sizes)
    rows = {}
    for name, seconds in [(n, times.stages[n]) for n in names] + [("end to end", times.end_to_end)]:
        p50, p90, p99 = (float(np.percentile(seconds, q)) * 1e3 for q in (50, 90, 99))
        rate = samples / (sum(seconds) if name != "end to end" else times.wall_s)
        rows[name] = {"p50_ms": p50, "p90_ms": p90, "p99_ms": p99, "samples_per_s": rate}
    busy: dict = {}
    for name, resource in zip(names, resources):
        busy[resource] = busy.get(resource, 0.0) + sum(times.busy[name])
    return {"samples": samples, "batches": len(times.batch_sizes), "wall_s": times.wall_s, "stages": rows,
            "busy": {device: min(1.0, b / times.wall_s) for device, b in busy.items()}}


def stream_table(summary: dict) -> list:
    """``stream_summary`` as the lines --benchmark prints."""
    lines = [f"{'stage':<20} {'p50 ms':>9} {'p90 ms':>9} {'p99 ms':>9} {'samples/s':>12}"]
    for name, row in summary["stages"].items():
        lines.append(f"{name:<20} {row['p50_ms']:>9.3f} {row['p90_ms']:>9.3f} {row['p99_ms']:>9.3f} "
                     f"{row['samples_per_s']:>12.1f}")
    lines.append("busy: " + ", ".join(f"{device} {share:.0%}" for device, share in summary["busy"].items())
                 + f" of {summary['wall_s'] * 1e3:.1f} ms")
    return lines


# ---------------------------------------------------------------- profiles (--profile)

PROFILE_FORMAT, PROFILE_VERSION = "hetdeploy-profile", 1


def profiled_node_seconds(model: str | bytes, samples: list, providers: list) -> dict:
    """Each node's seconds a sample by onnxruntime's own profiler: ``model`` (a path or its bytes)
    run on every one-sample feeds of ``samples`` in a session of its own at the basic level of
    graph optimisation, so that every node is timed under its own name (the higher levels fuse nodes
    and time them under new names); after a first run on the first sample, the warm-up, which is left
    out."""
    import onnxruntime

    folder = tempfile.mkdtemp(prefix="hetdeploy-profile-")
    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.add_session_config_entry("session.x64quantprecision", "1")
    options.enable_profiling = True
    options.profile_file_prefix = os.path.join(folder, "onnxruntime")
    try:
        session = onnxruntime.InferenceSession(model, options, providers=providers)
        names = [i.name for i in session.get_inputs()]
        for feeds in samples[:1] + samples:
            session.run(None, {n: feeds[n] for n in names})
        events = json.loads(Path(session.end_profiling()).read_text())
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    runs: dict = {}
    for event in events:
        if event.get("cat") == "Node" and event.get("name", "").endswith("_kernel_time"):
            runs.setdefault(event["name"][: -len("_kernel_time")], []).append(event["dur"] * 1e-6)
    return {node: float(np.mean(times[1:])) for node, times in runs.items() if len(times) > 1}


def one_sample_feeds(envs: list, names: list) -> list:
    """Each sample of the batches ``envs`` as feeds of one sample of the tensors ``names``."""
    return [{n: env[n][i:i + 1] for n in names} for env in envs for i in range(len(env[names[0]]))]


def _mean(values: list) -> Optional[float]:
    return float(np.mean(values)) if values else None


def profile_document(plan: dict, recorded_by: str, on_board: bool, times: StreamTimes, envs: list,
                     nodes: dict, fpga: dict) -> dict:
    """What a run measured, in the format ``hetdeploy plan --profile`` reads (docs/memory.md: Profiles):
    ``envs`` the batches' tensors, ``nodes`` per CPU/GPU subfunction each node's seconds a sample
    (``profiled_node_seconds``; absent: not timed, its nodes left out), ``fpga`` per FPGA subfunction its
    ``FpgaTimings`` (absent: only the call was timed)."""
    samples = sum(times.batch_sizes)
    machine = {"host": socket.gethostname(), "platform": platform.platform(), "machine": platform.machine()}
    try:
        import onnxruntime
        machine["onnxruntime"] = onnxruntime.__version__
    except ImportError:
        pass
    where = f"the board ({plan['board']})" if on_board else f"the host {machine['host']} ({machine['machine']})"
    subfunctions, links = [], []
    for sub in plan["subfunctions"]:
        calls = times.stages.get(sub["name"], [])
        entry = {"name": sub["name"], "device": sub["device"], "kind": sub["kind"], "calls": len(calls),
                 "samples_per_call": samples / max(1, len(calls)), "call_seconds": _mean(calls),
                 "estimated_compute_seconds": sub["estimate"]["compute_s"]}
        if sub["kind"] == "fpga":
            timed = fpga.get(sub["name"])
            entry["measured_on"] = (f"{sub['device']} of {where}" if on_board else
                                    f"C-simulation on {where}: not the FPGA's time")
            entry |= {"nodes": sub["nodes"], "core_seconds": _mean(timed.core) if timed else None,
                      "copy_in_seconds": _mean(timed.copy_in) if timed else None,
                      "copy_out_seconds": _mean(timed.copy_out) if timed else None}
            ports = [(sub["inputs"], sub["hls"]["inputs"], "copy_in_seconds", "host", sub["device"]),
                     (sub["outputs"], sub["hls"]["outputs"], "copy_out_seconds", sub["device"], "host")]
            for tensors, hls_ports, copy, source, target in ports:
                moved = sum(env[t].nbytes for env in envs for t in tensors)
                links.append({"subfunction": sub["name"], "from": source, "to": target, "tensors": len(tensors),
                              "compressed_tensors": sum(bool(p.get("compressed")) for p in hls_ports),
                              "bytes": moved / max(1, samples),
                              "seconds": entry[copy] * len(calls) / max(1, samples) if entry[copy] is not None
                              else None})
        else:
            entry["measured_on"] = (f"not timed: {recorded_by} runs it on onnxruntime's CPU provider, not on "
                                    f"{sub['device']}" if sub["name"] not in nodes else
                                    f"{sub['device']} of {where}" if on_board else
                                    f"{where}, standing in for {sub['device']}")
            entry["nodes"] = nodes.get(sub["name"], {})
        subfunctions.append(entry)
    return {"format": PROFILE_FORMAT, "version": PROFILE_VERSION, "recorded_by": recorded_by, "on_board": on_board,
            "board": plan["board"], "model": plan["source_model"], "machine": machine, "samples": samples,
            "batches": len(times.batch_sizes), "subfunctions": subfunctions, "links": links}


def write_profile(path: str, document: dict) -> None:
    try:
        Path(path).write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    except OSError as err:
        raise Problem(f"--profile {path}: cannot write it ({err.strerror})") from None


class Problem(Exception):
    """A mistake in how run.py was called: one line, exit 2."""


# Each build folder and its deploy/ hold a manifest: the sha256 of every file emulation and run.py
# read, checked before anything runs, so that a damaged build is refused instead of run
MANIFEST = "manifest.json"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_manifest(folder: Path, files: list[Path]) -> None:
    """``folder``'s MANIFEST: each of ``files`` (inside ``folder`` or, for deploy/'s, its parent) by its
    path relative to ``folder``, '/'-separated, and its sha256."""
    names = {os.path.relpath(f, folder).replace(os.sep, "/"): sha256_of(f) for f in files}
    (folder / MANIFEST).write_text(json.dumps({"files": dict(sorted(names.items()))}, indent=1) + "\n")


def check_manifest(folder: Path, emulate: bool) -> None:
    """Every file ``folder``'s MANIFEST lists is there and unchanged (Problem naming the first that is
    not); its entries in the folder above (deploy/'s manifest: the build folder's C-simulation files)
    only when ``emulate``."""
    path = folder / MANIFEST
    try:
        files = json.loads(path.read_text())["files"]
        if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
            raise ValueError("its files are not names and digests")
    except FileNotFoundError:
        raise Problem(f"{path}: missing: not a complete build (or one an older hetdeploy wrote); build it "
                      f"again") from None
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as err:  # JSONDecodeError is a ValueError
        raise Problem(f"{path}: damaged ({type(err).__name__}); build it again") from None
    for name, recorded in files.items():
        above = name.startswith("../")
        if above and not emulate:
            continue
        target = folder / name
        try:
            inside = (folder / name).resolve().is_relative_to((folder.parent if above else folder).resolve())
            found = sha256_of(target) if inside else None
        except FileNotFoundError:
            raise Problem(f"{target}: missing; the build is damaged (its {MANIFEST} lists it): build it again") \
                from None
        except (OSError, ValueError) as err:  # a folder, no permission, a NUL in the name
            raise Problem(f"{target}: cannot read it ({getattr(err, 'strerror', None) or err}); the build is "
                          f"damaged: build it again") from None
        if not inside:
            raise Problem(f"{path}: lists {name!r}, outside the build; the manifest is damaged: build it again")
        if found != recorded:
            raise Problem(f"{target}: changed since the build (its sha256 is not the one {MANIFEST} records); the "
                          f"build is damaged: build it again")


def check_output_path(path: str) -> None:
    """Before anything runs: ``path`` can take the outputs (not a folder, its folder exists)."""
    if os.path.isdir(path):
        raise Problem(f"--output {path}: is a folder; give the file to write (.npy for one output, .npz by name)")
    if not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        raise Problem(f"--output {path}: its folder does not exist")


def save_outputs(path: str, outputs: dict[str, np.ndarray]) -> None:
    """The outputs into exactly ``path`` (numpy would add .npy or .npz to a name without it): one as
    .npy, several as .npz by name."""
    try:
        with open(path, "wb") as file:
            if len(outputs) == 1:
                np.save(file, next(iter(outputs.values())))
            else:
                np.savez(file, **outputs)
    except OSError as err:
        raise Problem(f"--output {path}: cannot write it ({err.strerror})") from None


def read_inputs(path: str, specs: list[dict]) -> dict[str, np.ndarray]:
    """The samples in ``path`` by input name, each (N, *its shape without the batch axis), checked
    against the plan before anything reads them (a C core would read past a short buffer)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a pipe or device: np.load would block or never end
            raise Problem(f"{path}: is not a regular file; give the input as a .npy or .npz file")
        loaded = np.load(path, allow_pickle=False)
        if isinstance(loaded, np.lib.npyio.NpzFile):  # every array read now: a bad one fails here
            with loaded:
                loaded = {name: loaded[name] for name in loaded.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:  # missing, object arrays, truncated
        raise Problem(f"{path}: cannot read it as .npy or .npz of numbers ({err})") from None
    arrays = {specs[0]["name"]: loaded} if isinstance(loaded, np.ndarray) else loaded
    names = [spec["name"] for spec in specs]
    if sorted(arrays) != sorted(names):
        raise Problem(f"{path}: holds {sorted(arrays)}, the model takes {names}")
    counts = set()
    for spec in specs:
        array, sample = arrays[spec["name"]], list(spec["shape"][1:])
        if array.dtype.kind not in "fiub":
            raise Problem(f"{path}: input '{spec['name']}' holds {array.dtype}, not numbers")
        if array.ndim == len(sample):  # one sample without its batch axis
            array = arrays[spec["name"]] = array[None]
        if list(array.shape[1:]) != sample or len(array) == 0:
            raise Problem(f"{path}: input '{spec['name']}' has shape {list(array.shape)}, the model takes "
                          f"{[1, *sample]} (or N samples stacked on axis 0)")
        counts.add(len(array))
    if len(counts) > 1:
        raise Problem(f"{path}: the inputs hold different numbers of samples ({sorted(counts)})")
    return arrays


def load(emulate: bool) -> tuple[dict, list]:
    plan = json.loads((HERE / "plan.json").read_text())
    overlay = None
    if not emulate and any(s["kind"] == "fpga" for s in plan["subfunctions"]):
        try:
            import pynq
        except ImportError:
            raise Problem("pynq is not installed here: on the board, install it; on a host, add --emulate "
                          "(C-simulation in the build folder)") from None
        overlay = pynq.Overlay(str(HERE / "design.bit"))
    runners = []
    for sub in plan["subfunctions"]:
        if sub["kind"] != "fpga":
            runners.append(CpuSubfunction(sub))
        elif emulate:
            runners.append(EmulatedFpgaSubfunction(sub))
        else:
            runners.append(FpgaSubfunction(sub, overlay))
    return plan, runners


def batches_of(plan: dict, arrays: dict[str, np.ndarray], batch: int,
               specs: Optional[list[dict]] = None) -> list[dict[str, np.ndarray]]:
    """The samples in batches of ``batch`` (the last one what is left), as the subfunctions take them:
    the dtypes of ``specs`` (the plan's inputs'), and the leading reshapes absorbed at intake applied."""
    count = len(next(iter(arrays.values())))
    dtypes = {spec["name"]: spec.get("dtype", "float32") for spec in specs or plan["inputs"]}
    batches = []
    for start in range(0, count, batch):
        env = {k: np.ascontiguousarray(v[start:start + batch], dtype=dtypes.get(k, "float32"))
               for k, v in arrays.items()}
        for r in (r for r in plan["input_reshapes"] if r["original"]["name"] in env):
            x = env.pop(r["original"]["name"])
            env[r["tensor"]["name"]] = x.reshape([len(x), *r["tensor"]["shape"][1:]])
        batches.append(env)
    return batches


def codes_entry(plan: dict, profile: Optional[str]) -> tuple[list[dict], set]:
    """``--codes``: the inputs run.py reads instead of the model's (plan.json's "codes_input"), and the
    subfunctions it does not run."""
    entry = plan.get("codes_input")
    if entry is None:
        raise Problem("--codes: no FPGA input of this plan takes its input quantizer's codes from host subfunctions "
                      "that compute nothing else; give the model's input")
    if profile:
        raise Problem("--codes: --profile records the plan as built, its host subfunctions too; run without --codes")
    return entry["inputs"], set(entry["skipped"])


def check_codes(path: str, arrays: dict[str, np.ndarray], codes: dict[str, dict]) -> None:
    """``--codes``' arrays: integers, each one of its quantizer's codes."""
    for name, array in arrays.items():
        if array.dtype.kind not in "iu":
            raise Problem(f"{path}: input '{name}' holds {array.dtype}: --codes takes the quantizer's integer codes")
        try:
            _indices_of_codes(array.reshape(len(array), -1), codes[name])
        except ValueError as err:
            raise Problem(f"{path}: input '{name}': {err}") from None


def largest_batch(plan: dict) -> Optional[int]:
    """The most samples the plan's FPGA cores take in one call (None: no FPGA subfunction)."""
    sizes = [s["hls"].get("max_batch", 1) for s in plan["subfunctions"] if s["kind"] == "fpga" and s.get("hls")]
    return min(sizes) if sizes else None


def batch_problem(batch: int, most: Optional[int]) -> Optional[str]:
    """What is wrong with calling cores that take at most ``most`` samples (None: no core) with
    ``batch``; None when nothing is."""
    if most is None or batch <= most:
        return None
    return (f"--batch {batch}: the build's FPGA cores take at most {most} sample{'s' if most > 1 else ''} a call "
            f"(build with 'hetdeploy build --batch {batch}' for more)")


# the help of the options 'hetdeploy emulate' shares with run.py (the CLI reads it from here)
BATCH_HELP = ("samples per FPGA call (default 1; at most the build's 'hetdeploy build --batch'); the last batch takes "
              "what is left")
SEQUENTIAL_HELP = ("one batch after another through one subfunction after another (default: the subfunctions run as a "
                   "pipeline when there is more than one batch)")
BENCHMARK_HELP = ("print latency percentiles of a batch and throughput per subfunction and end to end, and how busy "
                  "each device was")


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="run.py", description="Run a hetdeploy plan on the board (or --emulate on "
                                     "a host).")
    parser.add_argument("--input", required=True, metavar="X.npy", help="inputs: .npy (one input) or .npz by name, "
                        "N samples stacked on axis 0")
    parser.add_argument("--output", metavar="Y.npy", help="where to save the outputs (.npy, or .npz by name)")
    parser.add_argument("--batch", type=int, default=1, metavar="N", help=BATCH_HELP)
    parser.add_argument("--sequential", action="store_true", help=SEQUENTIAL_HELP)
    parser.add_argument("--benchmark", action="store_true", help=BENCHMARK_HELP)
    parser.add_argument("--emulate", action="store_true", help="FPGA subfunctions through their C-simulation "
                        "libraries (a host with the build folder), not pynq")
    parser.add_argument("--codes", action="store_true", help="the input is the model input quantizer's integer codes "
                        "(as FINN's driver takes them: plan.json's 'codes_input' names the tensors, its FPGA subfunctions' "
                        "'input_codes' their codes), "
                        "not the model's input: the host subfunctions that computed them are not run")
    parser.add_argument("--profile", metavar="FILE.json", help="record what the run measured (each CPU node's time "
                        "by onnxruntime's profiler, in a second pass over the same inputs; each FPGA call's core time "
                        "and copies; the bytes and time of each link) for 'hetdeploy plan --profile'")
    return parser


def main(argv: list[str] | None = None) -> int:
    command_line = parser()
    args = command_line.parse_args(argv)
    if args.batch < 1:
        command_line.error(f"argument --batch: '{args.batch}': expected a whole number of at least 1")
    try:
        check_manifest(HERE, args.emulate)  # a damaged package is refused before anything reads it
        plan = json.loads((HERE / "plan.json").read_text())
        problem = batch_problem(args.batch, largest_batch(plan))
        if problem:
            raise Problem(problem)
        if args.output:
            check_output_path(args.output)
        plan, runners = load(args.emulate)
        specs, skipped = plan["inputs"], set()
        if args.codes:
            specs, skipped = codes_entry(plan, args.profile)
        arrays = read_inputs(args.input, specs)
        if args.codes:
            check_codes(args.input, arrays, {t: c for s in plan["subfunctions"]
                                             for t, c in s.get("input_codes", {}).items()})
    except Problem as problem:
        print(f"run.py: error: {problem}", file=sys.stderr)
        return 2
    stages = [Stage(s["name"], resource_of(s["kind"], s["device"], s["name"]), s["inputs"], runner)
              for s, runner in zip(plan["subfunctions"], runners) if s["name"] not in skipped]
    times = StreamTimes()
    envs = run_stream(stages, batches_of(plan, arrays, args.batch, specs), not args.sequential, times)
    outputs = {o["name"]: np.concatenate([env[o["name"]] for env in envs]) for o in plan["outputs"]}
    try:
        if args.output:
            save_outputs(args.output, outputs)
    except Problem as problem:
        print(f"run.py: error: {problem}", file=sys.stderr)
        return 2
    if args.benchmark:
        for line in stream_table(stream_summary([s.name for s in stages], [s.resource for s in stages], times)):
            print(line)
        how = "one after another" if args.sequential or len(envs) < 2 else "pipelined"
        print(f"{sum(times.batch_sizes)} samples in {len(envs)} batch(es) of up to {args.batch}, {how}"
              f"{', emulated' if args.emulate else ''}")
    if args.profile:
        nodes = {s["name"]: profiled_node_seconds(str(HERE / "models" / f"{s['name']}.onnx"),
                                                  one_sample_feeds(envs, s["inputs"]), ["CPUExecutionProvider"])
                 for s in plan["subfunctions"] if s["kind"] == "cpu"}  # a GPU's runs on the CPU provider here
        fpga = {s["name"]: runner.timings for s, runner in zip(plan["subfunctions"], runners) if s["kind"] == "fpga"}
        try:
            write_profile(args.profile, profile_document(plan, "run.py --emulate" if args.emulate else "run.py",
                                                         not args.emulate, times, envs, nodes, fpga))
        except Problem as problem:
            print(f"run.py: error: {problem}", file=sys.stderr)
            return 2
        print(f"profile written to {args.profile}")
    # a run that keeps nothing says what it did and how to keep it
    if not args.output and not args.benchmark and not args.profile:
        print(f"ran {sum(times.batch_sizes)} samples in {len(envs)} batch(es){' (emulated)' if args.emulate else ''}; "
              f"--output Y.npy saves the outputs, --benchmark prints the timings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
