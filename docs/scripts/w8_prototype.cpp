#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <immintrin.h>

// y[m, n] = scale[n] * sum_k x[m, k] * w[n, k]; x float32 [M, K], w int8 [N, K], K % 8 == 0.
// Every (m, n) is one 8-lane float32 accumulator over k in steps of 8, then one fixed horizontal sum: the same
// arithmetic whatever M is and however the rows are tiled, so a row's output never depends on the other rows.

static inline float hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  __m128 sh = _mm_movehdup_ps(lo);
  __m128 s = _mm_add_ps(lo, sh);
  sh = _mm_movehl_ps(sh, s);
  s = _mm_add_ss(s, sh);
  return _mm_cvtss_f32(s);
}

static inline __m256 load_w(const int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

template <int NB>
static void tile_m1(const float* x, const int8_t* w, int64_t K, float* acc_out) {
  __m256 acc[NB];
  for (int j = 0; j < NB; ++j) acc[j] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; k += 8) {
    __m256 xv = _mm256_loadu_ps(x + k);
    for (int j = 0; j < NB; ++j) acc[j] = _mm256_fmadd_ps(load_w(w + j * K + k), xv, acc[j]);
  }
  for (int j = 0; j < NB; ++j) acc_out[j] = hsum(acc[j]);
}

template <int MB>
static void tile_n2(const float* x, int64_t ldx, const int8_t* w, int64_t K, float* out /*[MB][2]*/) {
  __m256 a0[MB], a1[MB];
  for (int i = 0; i < MB; ++i) { a0[i] = _mm256_setzero_ps(); a1[i] = _mm256_setzero_ps(); }
  for (int64_t k = 0; k < K; k += 8) {
    __m256 w0 = load_w(w + k), w1 = load_w(w + K + k);
    for (int i = 0; i < MB; ++i) {
      __m256 xv = _mm256_loadu_ps(x + i * ldx + k);
      a0[i] = _mm256_fmadd_ps(w0, xv, a0[i]);
      a1[i] = _mm256_fmadd_ps(w1, xv, a1[i]);
    }
  }
  for (int i = 0; i < MB; ++i) { out[2 * i] = hsum(a0[i]); out[2 * i + 1] = hsum(a1[i]); }
}

torch::Tensor w8_mm(torch::Tensor x, torch::Tensor w, torch::Tensor scale) {
  TORCH_CHECK(x.dtype() == torch::kFloat32 && w.dtype() == torch::kInt8 && scale.dtype() == torch::kFloat32);
  x = x.contiguous(); w = w.contiguous();
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  TORCH_CHECK(w.size(1) == K && K % 8 == 0 && N % 8 == 0, "w8_mm: K and N must be multiples of 8");
  auto y = torch::empty({M, N}, x.options());
  const float* X = x.data_ptr<float>(); const int8_t* W = w.data_ptr<int8_t>();
  const float* S = scale.data_ptr<float>(); float* Y = y.data_ptr<float>();
  at::parallel_for(0, N / 8, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t n = b0 * 8; n < b1 * 8; n += 8) {
      if (M == 1) {
        float r[8];
        tile_m1<8>(X, W + n * K, K, r);
        for (int j = 0; j < 8; ++j) Y[n + j] = r[j] * S[n + j];
        continue;
      }
      for (int64_t n2 = n; n2 < n + 8; n2 += 2) {
        for (int64_t m = 0; m < M; m += 4) {
          float r[8];
          const int64_t mb = std::min<int64_t>(4, M - m);
          const float* xm = X + m * K;
          switch (mb) {
            case 4: tile_n2<4>(xm, K, W + n2 * K, K, r); break;
            case 3: tile_n2<3>(xm, K, W + n2 * K, K, r); break;
            case 2: tile_n2<2>(xm, K, W + n2 * K, K, r); break;
            default: tile_n2<1>(xm, K, W + n2 * K, K, r); break;
          }
          for (int64_t i = 0; i < mb; ++i) {
            Y[(m + i) * N + n2] = r[2 * i] * S[n2];
            Y[(m + i) * N + n2 + 1] = r[2 * i + 1] * S[n2 + 1];
          }
        }
      }
    }
  });
  return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("w8_mm", &w8_mm); }
