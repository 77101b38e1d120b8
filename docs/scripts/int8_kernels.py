"""Row-invariant int8 matrix kernels at the target's scale: the 28 decoder layers' seven matrices of
Qwen2.5-Coder-1.5B (random int8 weights, 1.3 GB, bigger than any L3), ms per pass for M rows, best of 3:
`_weight_int8pack_mm` (what the int8 target runs), `torch._int_mm` (int8 x int8; with and without quantising the
input per row) and the AVX2 prototype kernel in w8_prototype.cpp (compiled here with g++, ~20 s the first time).
Run from the repo root: python docs/scripts/int8_kernels.py   (under ../shared/tools/avx2 for the AVX2 setting)"""
import os
import time

import torch
from torch.utils.cpp_extension import load

torch.set_num_threads(2)
ext = load("w8_prototype", [os.path.join(os.path.dirname(__file__), "w8_prototype.cpp")],
           extra_cflags=["-O3", "-mavx2", "-mfma", "-fopenmp"], extra_ldflags=["-fopenmp"])
w = torch.randint(-127, 127, (256, 1536), dtype=torch.int8)
s = torch.rand(256)
x = torch.randn(9, 1536)
full = ext.w8_mm(x, w, s)
print("prototype row-invariant:", torch.equal(full, torch.cat([ext.w8_mm(x[i:i + 1], w, s) for i in range(9)])),
      torch.equal(full, torch.cat([ext.w8_mm(x[:5], w, s), ext.w8_mm(x[5:], w, s)])))
shapes = [(1536, 1536), (1536, 256), (1536, 256), (1536, 1536), (1536, 8960), (1536, 8960), (8960, 1536)]
layers = [[(torch.randint(-127, 127, (n, k), dtype=torch.int8), torch.rand(n)) for k, n in shapes] for _ in range(28)]
for layer in layers:
    for i, (wq, sf) in enumerate(layer):
        layer[i] = (wq, wq.t(), sf, sf.to(torch.bfloat16))


def one_pass(m: int, mode: str) -> None:
    xs = {k: torch.randn(m, k) for k, _ in shapes}
    xb = {k: v.to(torch.bfloat16) for k, v in xs.items()}
    xq = {k: torch.randint(-127, 127, (m, k), dtype=torch.int8) for k, _ in shapes}
    for layer in layers:
        for (k, _), (wq, wt, sf, sb) in zip(shapes, layer):
            if mode == "int8pack":
                torch.ops.aten._weight_int8pack_mm(xb[k], wq, sb)
            elif mode == "int_mm":
                torch._int_mm(xq[k], wt)
            elif mode == "int_mm+quant":
                sc = xb[k].abs().amax(-1, keepdim=True).float() / 127
                torch._int_mm(torch.round(xb[k].float() / sc).to(torch.int8), wt).float() * sc * sf
            else:
                ext.w8_mm(xs[k], wq, sf)


modes = ("int8pack", "int_mm", "int_mm+quant", "prototype")
print("| M | " + " | ".join(modes) + " |")
for m in (1, 2, 4, 6, 8, 16):
    row = []
    for mode in modes:
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            one_pass(m, mode)
            best = min(best, (time.perf_counter() - t0) * 1e3)
        row.append(f"{best:.1f}")
    print(f"| {m} | " + " | ".join(row) + " |", flush=True)
