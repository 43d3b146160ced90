"""HostDevice: real, aligned host memory behind the runner's Device interface."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from cake_core.run.host_device import ALIGNMENT, HostDevice


@pytest.mark.parametrize("nbytes", [0, 1, 255, 256, 257, 4099])
def test_buffers_are_aligned_and_sized(nbytes: int) -> None:
    dev = HostDevice()
    bufs = [dev.alloc(nbytes) for _ in range(4)]
    for b in bufs:
        assert dev.pointer(b) % ALIGNMENT == 0
        assert dev.nbytes(b) == nbytes
        assert b.data.nbytes == max(1, nbytes)
    assert len({dev.pointer(b) for b in bufs}) == 4
    assert dev.live == 4
    for b in bufs:
        dev.free(b)
    assert dev.live == 0


def test_pointer_is_the_memory_itself() -> None:
    """What C code reads and writes at `pointer` is what upload and download see."""
    dev = HostDevice()
    buf = dev.alloc(64)
    data = np.arange(16, dtype=np.float32)
    dev.upload(buf, data)
    seen = (ctypes.c_char * 64)()
    ctypes.memmove(seen, dev.pointer(buf), 64)
    assert bytes(seen) == data.tobytes()
    ctypes.memset(dev.pointer(buf) + 4, 0xAB, 4)  # as a kernel would write
    back = dev.download(buf, 64).view(np.uint32)
    assert back[1] == 0xABABABAB and back[2] == data.view(np.uint32)[2]


def test_fill_streams_and_the_still_clock() -> None:
    dev = HostDevice(name="the CPU, emulated with g++ 12")
    buf = dev.alloc(10)
    dev.fill(buf, 0xFF, 8, dev.new_stream())
    assert list(dev.download(buf, 10)) == [0xFF] * 8 + [0, 0]
    assert dev.stream_handle(dev.new_stream()) == 0
    start, end = dev.new_event(), dev.new_event()
    dev.record(start, None)
    dev.synchronize()
    dev.record(end, None)
    assert dev.elapsed_ms(start, end) == 0.0
    with pytest.raises(ValueError):
        dev.elapsed_ms(dev.new_event(), end)
    assert dev.backend == "emulate" and not dev.fake and dev.name.startswith("the CPU")
