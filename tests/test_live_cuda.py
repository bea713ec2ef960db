"""The cuda backend: a persistent kernel from qrt.h answers the twin's exact frames on an NVIDIA
GPU. Skips with the reason where there is no GPU (CI)."""
import pytest

from hw_bridge.contract import BridgeSettings
from hw_bridge.cuda import CudaEndpoint, GpuUnavailable, gpu_available
from twin.exchange.encoding import get_encoding
from twin.runtime.functions import lookup

OK, WHY = gpu_available()
needs_gpu = pytest.mark.skipif(not OK, reason=f"no GPU for the cuda backend: {WHY}")


def test_without_gpu_open_says_why():
    if OK:
        pytest.skip("a GPU is present")
    with pytest.raises(GpuUnavailable) as e:
        CudaEndpoint(BridgeSettings("cuda")).open(96, 4, "classic")
    assert e.value.reason == WHY and WHY


def _image(enc, seq, payload, fid):
    out = bytearray(enc.slot_bytes(len(payload)))
    for off, d in enc.writes(seq, payload, function=fid):
        out[off:off + len(d)] = d
    return bytes(out)


@needs_gpu
@pytest.mark.parametrize("encoding", ["classic", "per_piece"])
def test_kernel_answers_every_function(encoding):
    enc = get_encoding(encoding)
    slot = -(-enc.slot_bytes(64) // 16) * 16
    with CudaEndpoint(BridgeSettings("cuda", timeout_ns=2_000_000_000)) as ep:
        ep.open(slot, 8, encoding)
        for seq in range(1, 2001):
            fid = seq % 4
            payload = bytes((seq * 13 + 7 * j) & 255 for j in range(64))
            rep = ep.exchange(seq, _image(enc, seq, payload, fid))
            buf = bytearray(rep.data)
            h = enc.header(buf, 0)
            assert (h.seq, h.function, h.flags) == (seq, fid, 0)
            assert enc.payload(buf, 0) == lookup(fid).python(payload)
            assert rep.service_ns > 0
        stats = ep.close()
    assert stats["served"] == 2000 and stats["status"] == 0


@needs_gpu
def test_twin_run_with_live_gpu(tmp_path):
    from twin.commands import main
    rc = main(["run", "scenarios/live_gpu_cuda.yaml", "--rounds", "5000", "--out", str(tmp_path), "--quiet",
               "--no-plot"])
    assert rc == 0
    import json
    s = json.loads((tmp_path / "results.json").read_text())["consumers"][0]
    assert s["mismatches"] == 0 and s["replies_checked"] == 5000 and s["live"]["backend"] == "cuda"


def test_without_gpu_twin_run_says_why_before_any_progress(tmp_path, capsys):
    ok, why = gpu_available(0)
    if ok:
        pytest.skip("a GPU is present: the no-GPU error path is not reachable here")
    from test_live_shm import scenario

    from twin.commands import main
    rc = main(["run", str(scenario(tmp_path, rounds=100, bridge={"backend": "cuda"})), "--out", str(tmp_path / "o")])
    cap = capsys.readouterr()
    assert rc == 3 and cap.err.count("\n") == 1 and why in cap.err and "live cuda error at session start" in cap.err
    assert "0/100" not in cap.out  # no empty progress bar before it


def _raw_classic(seq, length_field, fill, slot):
    """A classic request slot image whose header claims ``length_field`` payload bytes (possibly more
    than the slot holds), payload area filled from ``fill``."""
    import struct
    body = bytes((fill + 5 * j) & 255 for j in range(slot - 16))
    return struct.pack("<IHHII", seq, 0, length_field, 0, 0) + body


@needs_gpu
@pytest.mark.parametrize("defines", [(), ("HB_NO_ECHO_PATH",)])
@pytest.mark.parametrize("slot", [96, 1040, 2064])
def test_echo_answers_as_the_runtime_library_on_the_cpu(defines, slot):
    """Classic echo at lengths 0..capacity and headers claiming more than the slot holds: the
    kernel's echo path (one chunk per lane at 96 B, four at 1,040 B; 2,064 B is past it and goes
    through the library) and, built with HB_NO_ECHO_PATH, its qrt_dispatch_one path answer byte for
    byte as the runtime library's qrt_dispatch_one in the shm consumer on the CPU (an over-long
    request: an empty reply with QRT_STATUS_BAD_LENGTH)."""
    from hw_bridge.shm import ShmEndpoint
    slots, cap = 4, slot - 16
    short = [*range(0, 34), 47, 48, 49, 495, 496, 497, 511, 512, 513, 1007, 1008, 1009, 1023, 1024]
    cases = [n for n in short if n < cap] + [cap - 1, cap, cap + 1, 65535]
    cuda = CudaEndpoint(BridgeSettings("cuda", timeout_ns=2_000_000_000))
    cuda.kernel_defines = defines
    with cuda, ShmEndpoint(BridgeSettings("shm", timeout_ns=2_000_000_000)) as cpu:
        cuda.open(slot, slots, "classic")
        cpu.open(slot, slots, "classic")
        for seq, length in enumerate(cases, start=1):
            image = _raw_classic(seq, length, seq, slot)
            want = cpu.exchange(seq, image).data
            assert cuda.exchange(seq, image).data == want, (length, defines)
        assert len(want) == 16 and want[8] == 2  # the last case: empty, QRT_STATUS_BAD_LENGTH
