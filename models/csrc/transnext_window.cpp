// TransNeXt's window branch on the CPU: the k x k window products of aggregated attention, the softmax over window
// and pooled logits, and their backward, each (image, head) one task with its maps in cache (models/transnext.py,
// _WindowAttentionCPU; the PyTorch ops of _WindowAttention compute the same and remain the fallback).
//
// Written here because no library kernel computes them on the CPU (docs/transnext.md, "Native window
// attention"): in eager PyTorch each of the k^2 window offsets is a separate pass over the whole batch's maps, and
// the branch was 18 % of a TransNeXt-Tiny training step (docs/benchmarks.md, "Issue 55, fifth pass"). The official
// code's answer for speed is its own kernel too (a CUDA extension, swattention).
//
// Layout: every map is channels-first per group, (G, C, N) with G = batch x heads and N = H x W, row-major.
// Window offset t of a k x k window (k = 2r + 1) moves a query at (y, x) to the key at (y + t / k - r,
// x + t % k - r); a key outside the map is absent (its logit is -inf, its weight 0). Float64 results agree with
// the PyTorch path's to rounding (tests/models/test_transnext.py).

#include <torch/extension.h>

#include <ATen/Parallel.h>
#include <ATen/ThreadLocalState.h>
#include <c10/util/safe_numerics.h>

#include <algorithm>
#include <vector>

namespace {

struct Geometry {
  int64_t height, width, window;
  int64_t taps() const { return window * window; }
  int64_t tokens() const { return height * width; }
};

// Window offset t as one contiguous run: the queries from the first valid one to the last (n0 .. n0 + len), keys
// at n + shift. Inside the run, |dx| positions at each row's end are queries whose key is absent (it wraps to the
// next row): the `gaps` of the run. Products over the whole run are long vectorised loops; their values at the
// gaps are then discarded (outputs zeroed there, weights zeroed there before they are used). One difference from
// the PyTorch path follows: a NaN or inf in a key or value at a row's end meets a gap's zero weight (0 x NaN =
// NaN) and can mark a neighbouring output NaN where the padded path's would stay finite -- in a step that is
// NaN-poisoned either way.
struct Run {
  int64_t n0 = 0, len = 0, shift = 0, y0 = 0, y1 = 0, x0 = 0, x1 = 0;
};

inline Run run_of(const Geometry& g, int64_t t) {
  const int64_t r = g.window / 2, dy = t / g.window - r, dx = t % g.window - r;
  Run run;
  run.y0 = std::max<int64_t>(0, -dy), run.y1 = std::min(g.height, g.height - dy);
  run.x0 = std::max<int64_t>(0, -dx), run.x1 = std::min(g.width, g.width - dx);
  if (run.y1 <= run.y0 || run.x1 <= run.x0) return run;  // len 0: no valid query (a map smaller than the window)
  run.n0 = run.y0 * g.width + run.x0;
  run.len = (run.y1 - 1) * g.width + run.x1 - run.n0;
  run.shift = dy * g.width + dx;
  return run;
}

// set v[n] = 0 at the run's gaps
template <typename T>
inline void zero_gaps(const Geometry& g, const Run& run, T* v) {
  if (run.len == 0) return;
  for (int64_t y = run.y0; y + 1 < run.y1; ++y)
    std::fill(v + y * g.width + run.x1, v + (y + 1) * g.width + run.x0, T(0));
}

// Products run over tiles of the queries so that the accumulators and the tile's inputs stay in L1 across the
// channels (a whole map's row of k^2 accumulators is 113 KB at TransNeXt's stage 1).
constexpr int64_t kTile = 512;

std::vector<Run> runs_of(const Geometry& g) {
  std::vector<Run> runs;
  for (int64_t t = 0; t < g.taps(); ++t) runs.push_back(run_of(g, t));
  return runs;
}

// f(first query, end) of run t's part inside [tile0, tile1)
template <typename F>
inline void in_tile(const Run& run, int64_t tile0, int64_t tile1, F&& f) {
  const int64_t lo = std::max(run.n0, tile0), hi = std::min(run.n0 + run.len, tile1);
  if (lo < hi) f(lo, hi);
}

// v[t, n] = 0 at every run's gaps (v offset-major, k^2 rows of N)
template <typename T>
inline void zero_all_gaps(const Geometry& g, const std::vector<Run>& runs, T* v) {
  for (int64_t t = 0; t < g.taps(); ++t) zero_gaps(g, runs[t], v + t * g.tokens());
}

// out[t, n] = the window weights of one group, offset-major: attn's window part (a: its (N, row) rows) plus pos[t, n]
// where given (the positional attention, added after the softmax), 0 at the gaps as window_sum needs
template <typename T>
void window_weights(const Geometry& g, const std::vector<Run>& runs, const T* a, int64_t row, const T* pos, T* out) {
  const int64_t n_all = g.tokens();
  for (int64_t t = 0; t < g.taps(); ++t)
    for (int64_t n = 0; n < n_all; ++n) out[t * n_all + n] = a[n * row + t] + (pos ? pos[t * n_all + n] : T(0));
  zero_all_gaps(g, runs, out);
}

// out[t, n] = sum_c a[c, n] * b[c, key of (n, t)]; 0 where the key is absent
template <typename T>
void window_dot(const Geometry& g, const std::vector<Run>& runs, const T* a, const T* b, int64_t channels, T* out) {
  const int64_t n_all = g.tokens();
  std::fill(out, out + g.taps() * n_all, T(0));
  for (int64_t tile0 = 0; tile0 < n_all; tile0 += kTile) {
    const int64_t tile1 = std::min(n_all, tile0 + kTile);
    for (int64_t c = 0; c < channels; ++c) {
      const T* ac = a + c * n_all;
      const T* bc = b + c * n_all;
      for (int64_t t = 0; t < g.taps(); ++t) {
        const int64_t shift = runs[t].shift;
        T* o = out + t * n_all;
        in_tile(runs[t], tile0, tile1, [&](int64_t lo, int64_t hi) {
#pragma omp simd
          for (int64_t i = lo; i < hi; ++i) o[i] += ac[i] * bc[i + shift];
        });
      }
    }
  }
  zero_all_gaps(g, runs, out);
}

// out[c, n] = sum_t w[t, n] * b[c, key of (n, t)] (gather), or, adjoint, out[c, key of (n, t)] += w[t, n] * b[c, n];
// w must be 0 at every run's gaps
template <typename T, bool Adjoint>
void window_sum(const Geometry& g, const std::vector<Run>& runs, const T* w, const T* b, int64_t channels, T* out) {
  const int64_t n_all = g.tokens();
  std::fill(out, out + channels * n_all, T(0));
  for (int64_t tile0 = 0; tile0 < n_all; tile0 += kTile) {
    const int64_t tile1 = std::min(n_all, tile0 + kTile);
    for (int64_t c = 0; c < channels; ++c) {
      const T* bc = b + c * n_all;
      T* oc = out + c * n_all;
      for (int64_t t = 0; t < g.taps(); ++t) {
        const int64_t shift = runs[t].shift;
        const T* wt = w + t * n_all;
        in_tile(runs[t], tile0, tile1, [&](int64_t lo, int64_t hi) {
          if (Adjoint) {
#pragma omp simd
            for (int64_t i = lo; i < hi; ++i) oc[i + shift] += wt[i] * bc[i];
          } else {
#pragma omp simd
            for (int64_t i = lo; i < hi; ++i) oc[i] += wt[i] * bc[i + shift];
          }
        });
      }
    }
  }
}

Geometry geometry_of(const torch::Tensor& map, int64_t height, int64_t width, int64_t window) {
  uint64_t tokens = 0;
  TORCH_CHECK(height > 0 && width > 0 && !c10::mul_overflows(uint64_t(height), uint64_t(width), &tokens),
              "window kernels: the map must be at least 1 x 1");
  TORCH_CHECK(map.dim() == 3 && map.size(2) == int64_t(tokens), "window kernels: maps must be (G, C, H*W)");
  TORCH_CHECK(window % 2 == 1 && window > 0, "window kernels: the window must be odd");
  return Geometry{height, width, window};
}

void check_shape(const torch::Tensor& t, c10::IntArrayRef shape, const char* name) {
  TORCH_CHECK(t.sizes() == shape, "window kernels: ", name, " has shape ", t.sizes(), ", expected ", shape);
}

void check(const torch::Tensor& t, const torch::Tensor& like, const char* name) {
  TORCH_CHECK(t.device().is_cpu() && t.is_contiguous() && t.scalar_type() == like.scalar_type(), "window kernels: ",
              name, " must be a contiguous CPU tensor of the maps' dtype");
}

}  // namespace

// attn (G, N, k^2 + P) = softmax over the last axis of [q.k over the window + bias_local | logits_pool];
// bias_local (heads, k^2, N) holds the static bias and -inf where the key is absent, shared by the G / heads
// images. Each group's logits are assembled in a buffer of the thread's and go through ATen's (vectorised)
// softmax straight into attn: no (G, N, k^2 + P) tensor of logits is allocated and written
torch::Tensor window_attention(torch::Tensor q, torch::Tensor k, torch::Tensor bias_local, torch::Tensor logits_pool,
                               int64_t height, int64_t width, int64_t window) {
  const Geometry g = geometry_of(q, height, width, window);
  const std::vector<Run> runs = runs_of(g);
  for (auto* t : {&q, &k, &bias_local, &logits_pool}) check(*t, q, "an input");
  const int64_t groups = q.size(0), channels = q.size(1), n_all = g.tokens(), taps = g.taps();
  const int64_t heads = bias_local.size(0), pool = logits_pool.size(2), row = taps + pool;
  TORCH_CHECK(bias_local.dim() == 3 && heads > 0 && groups % heads == 0 && logits_pool.dim() == 3,
              "window_attention: bias_local must be (heads, k^2, N) with heads dividing G, logits_pool (G, N, P)");
  check_shape(k, q.sizes(), "k");
  check_shape(bias_local, {heads, taps, n_all}, "bias_local");
  check_shape(logits_pool, {groups, n_all, pool}, "logits_pool");
  auto attn = torch::empty({groups, n_all, row}, q.options());
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "window_attention", [&] {
    const scalar_t *qp = q.data_ptr<scalar_t>(), *kp = k.data_ptr<scalar_t>();
    const scalar_t *bp = bias_local.data_ptr<scalar_t>(), *pp = logits_pool.data_ptr<scalar_t>();
    scalar_t* ap = attn.data_ptr<scalar_t>();
    // a few groups' logits per softmax call (~256 KB): one call per group costs more than the softmax at 14 x 14
    const int64_t per_call = std::max<int64_t>(1, (int64_t(1) << 18) / (n_all * row * int64_t(sizeof(scalar_t))));
    const at::ThreadLocalState caller;  // OpenMP's threads do not inherit it: inference mode, for the softmax's out=
    at::parallel_for(0, groups, 1, [&](int64_t begin, int64_t end) {
      at::ThreadLocalStateGuard state(caller);
      std::vector<scalar_t> local(taps * n_all);
      auto logits = torch::empty({per_call, n_all, row}, q.options());
      for (int64_t first = begin; first < end; first += per_call) {
        const int64_t count = std::min(per_call, end - first);
        for (int64_t grp = first; grp < first + count; ++grp) {
          window_dot(g, runs, qp + grp * channels * n_all, kp + grp * channels * n_all, channels, local.data());
          const scalar_t* bias = bp + (grp % heads) * taps * n_all;
          const scalar_t* pooled = pp + grp * n_all * pool;
          scalar_t* lp = logits.data_ptr<scalar_t>() + (grp - first) * n_all * row;
          for (int64_t n = 0; n < n_all; ++n) {
            scalar_t* o = lp + n * row;
            for (int64_t t = 0; t < taps; ++t) o[t] = local[t * n_all + n] + bias[t * n_all + n];
            std::copy(pooled + n * pool, pooled + (n + 1) * pool, o + taps);
          }
        }
        auto out = attn.narrow(0, first, count);
        at::_softmax_out(out, logits.narrow(0, 0, count), 2, false);  // in this parallel region: on this thread
      }
    });
  });
  return attn;
}

// x_local (G, C, N) = sum over the window of (attn's window weights [+ pos]) x v; attn (G, N, k^2 + P), pos
// (G, k^2, N) or empty
torch::Tensor window_values(torch::Tensor attn, torch::Tensor pos, torch::Tensor v, int64_t height, int64_t width,
                            int64_t window) {
  const Geometry g = geometry_of(v, height, width, window);
  const std::vector<Run> runs = runs_of(g);
  check(attn, v, "attn");
  check(v, v, "v");
  const bool has_pos = pos.numel() > 0;
  if (has_pos) check(pos, v, "pos");
  const int64_t groups = v.size(0), channels = v.size(1), n_all = g.tokens(), taps = g.taps();
  TORCH_CHECK(attn.dim() == 3 && attn.size(2) >= taps, "window_values: attn must be (G, N, k^2 + P)");
  const int64_t row = attn.size(2);
  check_shape(attn, {groups, n_all, row}, "attn");
  if (has_pos) check_shape(pos, {groups, taps, n_all}, "pos");
  auto out = torch::empty_like(v);
  AT_DISPATCH_FLOATING_TYPES(v.scalar_type(), "window_values", [&] {
    const scalar_t *ap = attn.data_ptr<scalar_t>(), *vp = v.data_ptr<scalar_t>();
    const scalar_t* pp = has_pos ? pos.data_ptr<scalar_t>() : nullptr;
    scalar_t* op = out.data_ptr<scalar_t>();
    at::parallel_for(0, groups, 1, [&](int64_t begin, int64_t end) {
      std::vector<scalar_t> weights(taps * n_all);
      for (int64_t grp = begin; grp < end; ++grp) {
        window_weights(g, runs, ap + grp * n_all * row, row, pp ? pp + grp * taps * n_all : nullptr, weights.data());
        window_sum<scalar_t, false>(g, runs, weights.data(), vp + grp * channels * n_all, channels,
                                    op + grp * channels * n_all);
      }
    });
  });
  return out;
}

// The backward of the window branch given grad = dL/dx (G, C, N) and dL/d(pooled weights) (G, N, P):
// [dL/dlogits (G, N, k^2 + P), dL/dpos (G, k^2, N), dL/dq, dL/dk, dL/dv (G, C, N)] (softmax backward included)
std::vector<torch::Tensor> window_backward(torch::Tensor grad, torch::Tensor grad_attn_pool, torch::Tensor q,
                                           torch::Tensor k, torch::Tensor v, torch::Tensor attn, torch::Tensor pos,
                                           int64_t height, int64_t width, int64_t window) {
  const Geometry g = geometry_of(grad, height, width, window);
  const std::vector<Run> runs = runs_of(g);
  for (auto* t : {&grad, &grad_attn_pool, &q, &k, &v, &attn}) check(*t, grad, "an input");
  const bool has_pos = pos.numel() > 0;
  if (has_pos) check(pos, grad, "pos");
  const int64_t groups = grad.size(0), channels = grad.size(1), n_all = g.tokens(), taps = g.taps();
  TORCH_CHECK(attn.dim() == 3 && attn.size(2) >= taps, "window_backward: attn must be (G, N, k^2 + P)");
  const int64_t row = attn.size(2), pool = row - taps;
  for (auto* t : {&q, &k, &v}) check_shape(*t, grad.sizes(), "q, k and v");
  check_shape(attn, {groups, n_all, row}, "attn");
  check_shape(grad_attn_pool, {groups, n_all, pool}, "grad_attn_pool");
  if (has_pos) check_shape(pos, {groups, taps, n_all}, "pos");
  auto grad_logits = torch::empty_like(attn);
  auto grad_pos = torch::empty({has_pos ? groups : 0, taps, n_all}, grad.options());
  auto grad_q = torch::empty_like(q), grad_k = torch::empty_like(k), grad_v = torch::empty_like(v);
  AT_DISPATCH_FLOATING_TYPES(grad.scalar_type(), "window_backward", [&] {
    const scalar_t *gp = grad.data_ptr<scalar_t>(), *gpool = grad_attn_pool.data_ptr<scalar_t>();
    const scalar_t *qp = q.data_ptr<scalar_t>(), *kp = k.data_ptr<scalar_t>(), *vp = v.data_ptr<scalar_t>();
    const scalar_t* ap = attn.data_ptr<scalar_t>();
    const scalar_t* pp = has_pos ? pos.data_ptr<scalar_t>() : nullptr;
    scalar_t *glp = grad_logits.data_ptr<scalar_t>(), *gposp = grad_pos.data_ptr<scalar_t>();
    scalar_t *gqp = grad_q.data_ptr<scalar_t>(), *gkp = grad_k.data_ptr<scalar_t>(), *gvp = grad_v.data_ptr<scalar_t>();
    at::parallel_for(0, groups, 1, [&](int64_t begin, int64_t end) {
      std::vector<scalar_t> local(taps * n_all);  // dL/dweights, then dL/dlogits of the window, offset-major
      std::vector<scalar_t> weights(taps * n_all);
      for (int64_t grp = begin; grp < end; ++grp) {
        const int64_t map = grp * channels * n_all;
        const scalar_t* a = ap + grp * n_all * row;
        scalar_t* gl = glp + grp * n_all * row;
        const scalar_t* gpl = gpool + grp * n_all * pool;
        // dL/dweights[t, n] = <grad[:, n], v[:, key]>: the gradient of pos, and of the window's softmax output
        window_dot(g, runs, gp + map, vp + map, channels, local.data());
        if (has_pos) std::copy(local.begin(), local.end(), gposp + grp * taps * n_all);
        for (int64_t n = 0; n < n_all; ++n) {  // softmax backward over the window and pooled weights
          const scalar_t* an = a + n * row;
          scalar_t dot = 0;
          for (int64_t t = 0; t < taps; ++t) dot += an[t] * local[t * n_all + n];
          for (int64_t p = 0; p < pool; ++p) dot += an[taps + p] * gpl[n * pool + p];
          scalar_t* gn = gl + n * row;
          for (int64_t t = 0; t < taps; ++t) {
            gn[t] = an[t] * (local[t * n_all + n] - dot);
            local[t * n_all + n] = gn[t];
          }
          for (int64_t p = 0; p < pool; ++p) gn[taps + p] = an[taps + p] * (gpl[n * pool + p] - dot);
        }
        window_weights(g, runs, a, row, pp ? pp + grp * taps * n_all : nullptr, weights.data());
        window_sum<scalar_t, false>(g, runs, local.data(), kp + map, channels, gqp + map);  // dq = sum dlogits * k[key]
        window_sum<scalar_t, true>(g, runs, local.data(), qp + map, channels, gkp + map);   // dk[key] += dlogits * q
        window_sum<scalar_t, true>(g, runs, weights.data(), gp + map, channels, gvp + map);  // dv[key] += weights * grad
      }
    });
  });
  return {grad_logits, grad_pos, grad_q, grad_k, grad_v};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  // without the GIL while they run, as ATen's own ops: other Python threads (a data loader's) go on meanwhile
  m.def("window_attention", &window_attention, py::call_guard<py::gil_scoped_release>());
  m.def("window_values", &window_values, py::call_guard<py::gil_scoped_release>());
  m.def("window_backward", &window_backward, py::call_guard<py::gil_scoped_release>());
}
