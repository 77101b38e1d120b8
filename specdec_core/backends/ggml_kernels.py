"""The llama.cpp backend's matmul probe: how fast ggml's CPU kernels multiply a quantised weight by n activation rows,
with the weight in cache, so the roofline's compute term comes from the kernels a forward runs rather than from the
hardware's peak (backends/roofline.py).

Why it is needed: on a 2-core Zen 4, llama.cpp's Q4_K kernels for 1-3 rows unpack the 4-bit weights once per row, so
each row costs nearly a whole step of arithmetic (T(2) = 1.9 T(1)), while its prompt pass, which runs another kernel
(the repacked 8x8 gemm over many rows), reaches 3x that rate per row. A roofline fed the prompt pass's rate missed
T(2)/T(1) by half.

It goes through ggml's own C API (the libraries llama-cpp-python ships, by ctypes): one weight of each (type, row
length) the GGUF holds, random values quantised by ggml_quantize_chunk, placed in the CPU backend's repacking buffer
when llama.cpp would repack it (the same supports_op test its loader runs), multiplied by n random rows in a graph
computed with the model's thread count. The weight is sized to stay in the cores' caches (about 1 MB), so the time is
arithmetic, not memory: the roofline adds the memory term itself."""
from __future__ import annotations

import ctypes as C
import os
import time
from functools import cache

import numpy as np

PROBE_BYTES = 1 << 20  # weight size: fits the L2 caches of two cores together
F32 = 0  # ggml_type values (as gguf.GGMLQuantizationType numbers them)


class _InitParams(C.Structure):
    _fields_ = [("mem_size", C.c_size_t), ("mem_buffer", C.c_void_p), ("no_alloc", C.c_bool)]


@cache
def _api():
    """ggml's functions from llama-cpp-python's libraries (ImportError when llama-cpp-python is missing)."""
    import llama_cpp

    lib = os.path.join(os.path.dirname(llama_cpp.__file__), "lib")
    base = C.CDLL(os.path.join(lib, "libggml-base.so"), mode=C.RTLD_GLOBAL)
    cpu = C.CDLL(os.path.join(lib, "libggml-cpu.so"), mode=C.RTLD_GLOBAL)
    P = C.c_void_p

    def fn(lib, name, res, *args):
        f = getattr(lib, name)
        f.restype, f.argtypes = res, list(args)
        return f

    api = {
        "init": fn(base, "ggml_init", P, _InitParams), "free": fn(base, "ggml_free", None, P),
        "new_2d": fn(base, "ggml_new_tensor_2d", P, P, C.c_int, C.c_int64, C.c_int64),
        "mul_mat": fn(base, "ggml_mul_mat", P, P, P, P), "new_graph": fn(base, "ggml_new_graph", P, P),
        "expand": fn(base, "ggml_build_forward_expand", None, P, P),
        "quantize": fn(base, "ggml_quantize_chunk", C.c_size_t, C.c_int, P, P, C.c_int64, C.c_int64, C.c_int64, P),
        "row_size": fn(base, "ggml_row_size", C.c_size_t, C.c_int, C.c_int64),
        "set": fn(base, "ggml_backend_tensor_set", None, P, P, C.c_size_t, C.c_size_t),
        "alloc": fn(base, "ggml_backend_alloc_ctx_tensors_from_buft", P, P, P),
        "buffer_free": fn(base, "ggml_backend_buffer_free", None, P),
        "cpu_buft": fn(base, "ggml_backend_cpu_buffer_type", P),
        "proc": fn(base, "ggml_backend_reg_get_proc_address", P, P, C.c_char_p),
        "dev_get": fn(base, "ggml_backend_reg_dev_get", P, P, C.c_size_t),
        "supports": fn(base, "ggml_backend_dev_supports_op", C.c_bool, P, P),
        "compute": fn(base, "ggml_backend_graph_compute", C.c_int, P, P),
        "backend_free": fn(base, "ggml_backend_free", None, P),
        "cpu_init": fn(cpu, "ggml_backend_cpu_init", P),
        "threads": fn(cpu, "ggml_backend_cpu_set_n_threads", None, P, C.c_int),
        "cpu_reg": fn(cpu, "ggml_backend_cpu_reg", P),
    }
    log = C.CFUNCTYPE(None, C.c_int, C.c_char_p, C.c_void_p)(
        lambda level, text, _: print(text.decode(errors="replace"), end="") if level == 4 else None)  # errors only
    api["log"] = log  # (kept alive: ggml holds the pointer) - the repacking logs a line per weight otherwise
    fn(base, "ggml_log_set", None, P, P)(C.cast(log, P), None)
    reg = api["cpu_reg"]()
    api["dev"] = api["dev_get"](reg, 0)
    extra = C.CFUNCTYPE(C.POINTER(P), P)(api["proc"](reg, b"ggml_backend_dev_get_extra_bufts"))(api["dev"])
    api["extra_bufts"] = [extra[i] for i in range(8) if extra[i]] if extra else []
    return api


def matmul_seconds(qtype: int, k: int, sizes: tuple[int, ...], threads: int, repack: bool,
                   reps: int = 20) -> tuple[bool, dict[int, float]]:
    """(repacked, {n: seconds per weight row}): a cache-sized [m, k] weight of ggml type `qtype` times n rows, fastest
    of 3 bursts of `reps`; in llama.cpp's repacking buffer where `repack` asks for it and that buffer takes such a
    weight (`repacked` says which ran)."""
    if repack and (seconds := _timed(qtype, k, sizes, threads, True, reps)) is not None:
        return True, seconds
    return False, _timed(qtype, k, sizes, threads, False, reps)


def _timed(qtype: int, k: int, sizes: tuple[int, ...], threads: int, repack: bool, reps: int) -> dict[int, float] | None:
    """matmul_seconds' timing; None where the repacking buffer is asked for and does not take the weight (llama.cpp's
    loader keeps such a weight plain, by the same supports_op test)."""
    g = _api()
    if repack and not g["extra_bufts"]:
        return None
    m = max(16, PROBE_BYTES // g["row_size"](qtype, k) // 16 * 16)
    ctx_w = g["init"](_InitParams(1 << 16, None, True))
    ctx = g["init"](_InitParams(1 << 22, None, True))
    backend = g["cpu_init"]()
    buffers = []
    try:
        g["threads"](backend, threads)
        weight = g["new_2d"](ctx_w, qtype, k, m)
        rows = {n: g["new_2d"](ctx, F32, k, n) for n in sizes}
        outs = {n: g["mul_mat"](ctx, weight, rows[n]) for n in sizes}
        buffers.append(g["alloc"](ctx_w, g["extra_bufts"][0] if repack else g["cpu_buft"]()))
        if repack and not g["supports"](g["dev"], outs[sizes[0]]):
            return None
        rng = np.random.default_rng(0)
        values = rng.standard_normal((m, k), dtype=np.float32)
        packed = np.zeros(g["row_size"](qtype, k) * m, dtype=np.uint8)
        g["quantize"](qtype, values.ctypes.data, packed.ctypes.data, 0, m, k, None)
        g["set"](weight, packed.ctypes.data, 0, packed.nbytes)
        buffers.append(g["alloc"](ctx, g["cpu_buft"]()))
        seconds = {}
        for n in sizes:
            x = rng.standard_normal((n, k), dtype=np.float32)
            g["set"](rows[n], x.ctypes.data, 0, x.nbytes)
            graph = g["new_graph"](ctx)
            g["expand"](graph, outs[n])
            g["compute"](backend, graph)  # warm-up
            best = float("inf")
            for _ in range(3):
                t0 = time.perf_counter()
                for _ in range(reps):
                    g["compute"](backend, graph)
                best = min(best, (time.perf_counter() - t0) / reps)
            seconds[n] = best / m
        return seconds
    finally:
        for b in buffers:
            g["buffer_free"](b)
        g["free"](ctx)
        g["free"](ctx_w)
        g["backend_free"](backend)


def model_tflops(weights: list[tuple[int, int, int]], sizes: tuple[int, ...], threads: int,
                 repack: bool) -> dict[int, float]:
    """{n: TFLOPS} a forward's matmuls reach on n rows: `weights` lists (ggml type, row length k, rows m) of every
    matmul weight of the model; each (type, k) is probed once and its per-row time scaled by m."""
    per_row = {key: matmul_seconds(*key, sizes, threads, repack)[1] for key in {(t, k) for t, k, _ in weights}}
    flops = sum(2 * k * m for _, k, m in weights)
    return {n: round(flops * n / sum(per_row[(t, k)][n] * m for t, k, m in weights) / 1e12, 4) for n in sizes}
