"""Backend ``cuda``: a persistent kernel built from the device runtime library on an NVIDIA GPU.

The kernel (``c/hb_cuda_kernel.cu``: ``qrt.h`` + the C functions of ``qrt_functions.c`` built as
device code; one warp moves each slot across PCIe in one burst, answers a classic echo from its
registers and dispatches anything else with the library on an on-chip copy) is compiled with
``nvcc -cubin -arch=sm_XY`` for the device's compute capability (cached under
``$TWIN_CACHE_DIR``) and loaded through CuPy (``cupy.RawModule(path=...)``). Both queues are in
pinned, mapped host memory (``cudaHostAlloc(..., cudaHostAllocMapped)``): the kernel polls the
request queue across PCIe, the host polls the reply's ready word in its own memory. The producer
side of each round is C (``c/hb_producer.c``), as for ``shm``
(:class:`hw_bridge.producer.CProducerEndpoint`).

Without CuPy, a driver, a GPU or nvcc, :func:`gpu_available` says why and :meth:`open` raises
:class:`GpuUnavailable` (a :class:`LiveFailure`, kind ``error``) with that reason.
"""
from __future__ import annotations

import ctypes
import shutil
import subprocess
import time

import numpy as np

from hw_bridge.build import HERE, _cache, _digest, producer_library
from hw_bridge.endpoint import BridgeSettings, LiveFailure, LiveReply
from hw_bridge.producer import CProducerEndpoint
from twin.runtime.native import C_DIR as RUNTIME_C
from twin.runtime.native import ENCODINGS


class GpuUnavailable(LiveFailure):
    """No usable NVIDIA GPU here (no CuPy, no driver, no device, or no nvcc)."""

    def __init__(self, reason: str):
        super().__init__("error", 0, reason, "cuda")
        self.reason = reason


def gpu_available(device: int = 0) -> tuple[bool, str]:
    """(True, device name) when the cuda backend can run here, else (False, the reason)."""
    try:
        import cupy
    except ImportError:
        return False, "the cuda backend needs CuPy and an NVIDIA GPU: CuPy is not installed"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001 -- CUDARuntimeError without a driver, or a CUDA library CuPy cannot load
        return False, f"no NVIDIA GPU driver usable by CuPy ({e})"
    if n <= device:
        return False, f"GPU {device} requested, {n} present"
    if shutil.which("nvcc") is None:
        return False, "nvcc (CUDA toolkit) is not on PATH; it builds the persistent kernel"
    name = cupy.cuda.runtime.getDeviceProperties(device)["name"]
    return True, name.decode() if isinstance(name, bytes) else str(name)


def kernel_cubin(arch: str, defines: tuple[str, ...] = ()) -> str:
    """Build (once) and return the path of the persistent kernel's cubin for ``sm_<arch>``;
    ``defines`` are extra ``-D`` macros (``HB_NO_ECHO_PATH``: every request through
    qrt_dispatch_one, as benchmarks/cuda_overhead.py compares)."""
    src = HERE / "hb_cuda_kernel.cu"
    flags = [f"-arch=sm_{arch}", "-O2", "-cubin", *(f"-D{d}" for d in defines)]
    deps = [src, RUNTIME_C / "qrt_functions.c", RUNTIME_C / "qrt.h", RUNTIME_C / "qrt_lookup.h",
            RUNTIME_C / "qrt_uf_graph.h"]
    target = _cache() / f"hb_cuda_kernel-{_digest(deps, flags)}.cubin"
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        cmd = ["nvcc", *flags, "-I", str(RUNTIME_C), str(src), "-o", str(target) + ".tmp"]
        res = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if res.returncode != 0:
            raise GpuUnavailable(f"nvcc failed ({' '.join(cmd)}): {res.stderr.strip()}")
        (target.parent / (target.name + ".tmp")).replace(target)
    return str(target)


class CudaEndpoint(CProducerEndpoint):
    """A live GPU consumer: the persistent kernel serving queues in mapped host memory."""

    backend = "cuda"
    #: extra -D macros for the kernel's build (:func:`kernel_cubin`); the twin uses none
    kernel_defines: tuple[str, ...] = ()

    def __init__(self, settings: BridgeSettings):
        super().__init__(settings)
        self._host = 0
        self._ctl = None
        self.name = ""

    def open(self, slot_bytes: int, slots: int, encoding: str) -> None:
        """Allocate mapped host memory, build and launch the kernel, wait until it serves (10 s).
        Raises :class:`GpuUnavailable` without a GPU, :class:`LiveFailure` otherwise."""
        ok, why = gpu_available(self.settings.device)
        if not ok:
            raise GpuUnavailable(why)
        import cupy
        rt = cupy.cuda.runtime
        self.name = why
        self.slot_bytes, self.slots, self.encoding = slot_bytes, slots, encoding
        self._enc = ENCODINGS[encoding]
        self._lib = producer_library()
        dev = cupy.cuda.Device(self.settings.device)
        dev.use()
        cc = dev.compute_capability
        self._qbytes = -(-slot_bytes * slots // 4096) * 4096
        total = 4096 + 2 * self._qbytes
        self._host = rt.hostAlloc(total, rt.hostAllocMapped)
        ctypes.memset(self._host, 0, total)
        self._ctl = np.ctypeslib.as_array((ctypes.c_uint8 * 4096).from_address(self._host)).view(np.int32)
        self._total = total
        # Unified virtual addressing (every 64-bit CUDA platform): a mapped pinned allocation has
        # the same address on the device as on the host (what cudaHostGetDevicePointer returns).
        if not rt.getDeviceProperties(self.settings.device).get("unifiedAddressing", 1):
            rt.freeHost(self._host)
            self._host = 0
            raise GpuUnavailable("this GPU has no unified addressing; mapped host memory needs it here")
        dptr = self._host
        self._req, self._rep = self._host + 4096, self._host + 4096 + self._qbytes
        # control words in the first page: stop (qrt_signal) @0, status (int) @64, served (u64) @128
        self._ctl[16] = -100  # not started
        per_piece = encoding == "per_piece"
        cap = (slot_bytes // 16 - 1) * 12 if per_piece else slot_bytes - 16
        stage_bytes = 2 * (-(-cap // 16) * 16) * slots if per_piece else 0
        self._stage = cupy.zeros(max(16, stage_bytes), cupy.uint8)
        self._module = cupy.RawModule(path=kernel_cubin(cc, self.kernel_defines))
        kern = self._module.get_function("hb_live_kernel")
        self._stream = cupy.cuda.Stream(non_blocking=True)
        u64, u32 = np.uint64, np.uint32
        shared = 2 * slot_bytes  # the kernel's on-chip mirror of one request slot and one reply slot
        if shared > 48 * 1024:
            kern.max_dynamic_shared_size_bytes = shared
        with self._stream:
            kern((1,), (32,), (u64(dptr + 4096), u64(dptr + 4096 + self._qbytes), u32(slot_bytes), u32(slots),
                               u32(self._enc), u64(self._stage.data.ptr if stage_bytes else 0), u64(dptr),
                               u64(dptr + 128), u64(dptr + 64)), shared_mem=shared)
        deadline = time.monotonic() + 10
        while int(self._ctl[16]) == -100 and time.monotonic() < deadline:
            time.sleep(0.0005)
        if int(self._ctl[16]) != 1:
            code = int(self._ctl[16])
            self.close()
            raise LiveFailure("error", 0, f"the persistent kernel did not start (status {code})", "cuda")

    def close(self) -> dict:
        """Raise the stop signal, wait for the kernel (5 s), free the memory."""
        stats = {"served": 0, "status": None, "device": self.name}
        if not self._host or self._ctl is None:
            return stats
        import cupy
        ctypes.c_uint32.from_address(self._host).value = 1
        deadline = time.monotonic() + 5
        while int(self._ctl[16]) == 1 and time.monotonic() < deadline:
            time.sleep(0.0005)
        stats["status"] = int(self._ctl[16])
        stats["served"] = int(self._ctl[32:34].view(np.uint64)[0])
        if stats["status"] != 1:
            self._stream.synchronize()
            cupy.cuda.runtime.freeHost(self._host)
        self._host = 0
        return stats

    def describe(self) -> str:
        """Backend, GPU name, where the queues are."""
        return (f"cuda: persistent kernel, one warp (echo from the slot's burst; other functions qrt.h's "
                f"qrt_dispatch_one on an on-chip copy) on "
                f"{self.name} (GPU {self.settings.device}); queues in pinned mapped host memory")

    def _batch_failure(self, seq: int) -> LiveFailure:
        """A batch's reply did not come: the kernel exited (``dead``) or is not answering (``hung``)."""
        status = int(self._ctl[16])
        if status != 1:
            return LiveFailure("dead", seq, f"the persistent kernel exited (status {status})", "cuda")
        return LiveFailure("hung", seq, "no reply within the timeout in a batch", "cuda")

    def _finish(self, seq: int, r: int, off: int, timeout: int) -> LiveReply:
        if r == 1:
            n = self._nb.value
            if n > self.slot_bytes:
                raise LiveFailure("wrong", seq, f"reply header claims {n} bytes, the slot holds {self.slot_bytes}",
                                  "cuda")
            data = ctypes.string_at(self._rep + off, n)
            self._record(self._t[0], self._t[1])
            return LiveReply(seq, data, self._t[0], self._t[1])
        status = int(self._ctl[16])
        if status != 1:
            raise LiveFailure("dead", seq, f"the persistent kernel exited (status {status})", "cuda")
        raise LiveFailure("hung", seq, f"no reply within {timeout / 1e6:g} ms", "cuda")
