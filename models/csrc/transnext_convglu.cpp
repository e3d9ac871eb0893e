// TransNeXt's ConvGLU tail on the CPU: hidden = GELU(dwconv3x3(gate) + bias) * value and its backward, each one
// pass over the maps (models/transnext.py, _GatedConvFC and ConvolutionalGLU; the PyTorch ops compute the same and
// remain the fallback). fc2, a GEMM, stays PyTorch's.
//
// Written here because no library op fuses them: in eager PyTorch the depthwise conv, the GELU, the product and in
// backward the recomputed conv and GELU, GELU's backward, two more products and the conv's backward are each a pass
// over a hidden-width map (38 MB per batch of 8 at stage 1), and together they were ~17 % of a TransNeXt-Tiny
// training step on the CPU (docs/benchmarks.md, "Issue 55, sixth pass"). oneDNN fuses a GELU into a convolution's
// forward only.
//
// Layout: every map is channels-last, (B, H x W, C) row-major, as the tokens are. The conv is 3 x 3, stride 1,
// zero padding 1, one filter per channel (weight (C, 1, 3, 3)). The GELU is the exact one (erf), with its
// derivative as ATen's gelu_backward computes it; the erf below (normal_cdf_pdf).

#include <torch/extension.h>

#include <ATen/MemoryOverlap.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/vec.h>

#include <algorithm>
#include <type_traits>
#include <vector>

namespace {

using at::vec::Vectorized;

struct Map {
  int64_t batch, height, width, channels;
  int64_t pixel(int64_t b, int64_t y, int64_t x) const { return ((b * height + y) * width + x) * channels; }
};

// Phi(x) and phi(x), the normal distribution's CDF and density, from one exp. float: erf by Abramowitz & Stegun
// 7.1.26 (|error| <= 1.5e-7), the formula of ATen's own AVX512/AVX2 Vectorized<float>::erf, with ATen's inline
// exp_u20 -- inline, because a call into libtorch's Sleef exp inside these loops spills every vector register they
// hold (it made the GELU 3x slower than oneDNN's, which ATen's gelu runs). double (the float64 tests): ATen's erf and
// exp, exact to rounding.
template <typename T>
inline void normal_cdf_pdf(Vectorized<T> x, Vectorized<T>& cdf, Vectorized<T>& pdf) {
  using V = Vectorized<T>;
  const V half(T(0.5)), one(T(1)), z = x * V(T(M_SQRT1_2));
  if constexpr (std::is_same_v<T, float>) {
    const V e = (z * z).neg().exp_u20();  // exp(-z^2) = exp(-x^2 / 2)
    const V t = one / (one + V(0.3275911f) * z.abs());
    V poly = at::vec::fmadd(V(1.061405429f), t, V(-1.453152027f));
    poly = at::vec::fmadd(poly, t, V(1.421413741f));
    poly = at::vec::fmadd(poly, t, V(-0.284496736f));
    poly = at::vec::fmadd(poly, t, V(0.254829592f));
    const V erf_abs = one - poly * t * e;
    cdf = half * (one + V::blendv(erf_abs, erf_abs.neg(), z < V(0.f)));
    pdf = e * V(T(M_2_SQRTPI * M_SQRT1_2 * 0.5));
  } else {
    cdf = half * (one + z.erf());
    pdf = (z * z).neg().exp() * V(T(M_2_SQRTPI * M_SQRT1_2 * 0.5));
  }
}

// GELU(x) = x Phi(x) and dGELU/dx = Phi(x) + x phi(x), as ATen's gelu and gelu_backward define them (exact GELU)
template <typename T>
inline void gelu_and_slope(Vectorized<T> x, Vectorized<T>& value, Vectorized<T>& slope) {
  Vectorized<T> cdf, pdf;
  normal_cdf_pdf(x, cdf, pdf);
  value = x * cdf;
  slope = cdf + x * pdf;
}

template <typename T>
inline Vectorized<T> gelu(Vectorized<T> x) {
  Vectorized<T> cdf, pdf;
  normal_cdf_pdf(x, cdf, pdf);
  return x * cdf;
}

// the 3 x 3 taps inside the map, visited as f(tap, pixel offset from (y, x)); an interior pixel's nine without a
// bounds check (the compiler unrolls them: this is the common case at every stage)
template <typename F>
inline void for_taps(const Map& m, int64_t y, int64_t x, F&& f) {
  if (y > 0 && y + 1 < m.height && x > 0 && x + 1 < m.width) {
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 3; ++j) f(i * 3 + j, ((i - 1) * m.width + j - 1) * m.channels);
    return;
  }
  for (int64_t i = 0; i < 3; ++i) {
    if (y + i - 1 < 0 || y + i - 1 >= m.height) continue;
    for (int64_t j = 0; j < 3; ++j)
      if (x + j - 1 >= 0 && x + j - 1 < m.width) f(i * 3 + j, ((i - 1) * m.width + j - 1) * m.channels);
  }
}

// The conv along row y of a map at channels [c, c + n): f(x, bias + the taps' sum) for x = 0 .. W - 1, the nine
// weights `w` (tap-major) and the bias held in registers across the row. `image` holds the map's rows from
// `first_row` on (a band of them, for dL/d(conv output)).
template <typename T, typename F>
inline void conv_row(const Map& m, const T* image, int64_t first_row, const Vectorized<T>* w, Vectorized<T> bias,
                     int64_t y, int64_t c, int64_t n, F&& f) {
  for (int64_t x = 0; x < m.width; ++x) {
    const T* p = image + ((y - first_row) * m.width + x) * m.channels + c;
    Vectorized<T> acc = bias;
    for_taps(m, y, x, [&](int64_t tap, int64_t offset) {
      acc = at::vec::fmadd(w[tap], Vectorized<T>::loadu(p + offset, n), acc);
    });
    f(x, acc);
  }
}

// the nine weights (and the bias) at channels [c, c + n), `mirrored`: tap t's weight at 8 - t (the transposed conv)
template <typename T>
inline void load_weights(const T* taps, const T* bias, int64_t channels, int64_t c, int64_t n, bool mirrored,
                         Vectorized<T>* w, Vectorized<T>& b) {
  for (int64_t t = 0; t < 9; ++t) w[mirrored ? 8 - t : t] = Vectorized<T>::loadu(taps + t * channels + c, n);
  b = bias ? Vectorized<T>::loadu(bias + c, n) : Vectorized<T>(T(0));
}

// rows per backward task: the task's dL/d(conv output) rows, with a row of halo each side, stay within ~1 MB
constexpr int64_t kBandElements = int64_t(1) << 18;

void check(const torch::Tensor& t, const torch::Tensor& like, const char* what) {
  TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == like.scalar_type() && t.is_contiguous(), "convglu: ", what,
              " must be a contiguous CPU tensor of ", like.scalar_type());
}

Map map_of(const torch::Tensor& gate, int64_t height, int64_t width) {
  // (height <= N and width <= N first: their product cannot overflow then)
  TORCH_CHECK(gate.dim() == 3 && height > 0 && width > 0 && height <= gate.size(1) && width <= gate.size(1) &&
                  gate.size(1) == height * width,
              "convglu: gate must be (B, H x W, C) with H, W > 0, got ", gate.sizes(), " for ", height, " x ", width);
  return Map{gate.size(0), height, width, gate.size(2)};
}

// weight (C, 1, 3, 3) -> (9, C) tap-major; bias (C) or empty
torch::Tensor taps_of(const torch::Tensor& weight, const torch::Tensor& bias, const torch::Tensor& gate) {
  const int64_t c = gate.size(2);
  TORCH_CHECK(weight.dim() == 4 && weight.size(0) == c && weight.size(1) == 1 && weight.size(2) == 3 &&
                  weight.size(3) == 3,
              "convglu: weight must be (C, 1, 3, 3) with C = ", c, ", got ", weight.sizes());
  TORCH_CHECK(weight.device().is_cpu() && weight.scalar_type() == gate.scalar_type(), "convglu: weight's dtype");
  TORCH_CHECK(bias.numel() == 0 || (bias.dim() == 1 && bias.size(0) == c), "convglu: bias must be (C) or empty");
  if (bias.numel()) check(bias, gate, "bias");
  return weight.reshape({c, 9}).t().contiguous();
}

void check_same(const torch::Tensor& t, const torch::Tensor& gate, const char* what) {
  check(t, gate, what);
  TORCH_CHECK(t.sizes() == gate.sizes(), "convglu: ", what, " must have gate's shape ", gate.sizes(), ", got ",
              t.sizes());
}

// an output sharing memory with an input would be read after it is written (the conv's neighbours, the halo rows)
void check_apart(const torch::Tensor& out, std::initializer_list<const torch::Tensor*> inputs) {
  for (const torch::Tensor* in : inputs) at::assert_no_overlap(out, *in);
}

}  // namespace

// hidden = GELU(dwconv(gate) + bias) * value, written into `out` (gate's shape; may be `value` itself: each
// position of value is read once, before that position is written)
torch::Tensor convglu_forward(torch::Tensor gate, torch::Tensor value, torch::Tensor weight, torch::Tensor bias,
                              int64_t height, int64_t width, torch::Tensor out) {
  const Map m = map_of(gate, height, width);
  check(gate, gate, "gate");
  check_same(value, gate, "value");
  check_same(out, gate, "out");
  if (!out.is_same(value)) check_apart(out, {&value});  // out may be value itself: each read before its write
  check_apart(out, {&gate, &weight, &bias});
  const torch::Tensor taps = taps_of(weight, bias, gate);
  AT_DISPATCH_FLOATING_TYPES(gate.scalar_type(), "convglu_forward", [&] {
    using V = Vectorized<scalar_t>;
    const scalar_t *gp = gate.data_ptr<scalar_t>(), *vp = value.data_ptr<scalar_t>();
    const scalar_t *wp = taps.data_ptr<scalar_t>(), *bp = bias.numel() ? bias.data_ptr<scalar_t>() : nullptr;
    scalar_t* op = out.data_ptr<scalar_t>();
    at::parallel_for(0, m.batch * m.height, 1, [&](int64_t begin, int64_t end) {
      V w[9], bv;
      for (int64_t task = begin; task < end; ++task) {
        const int64_t b = task / m.height, y = task % m.height;
        for (int64_t c = 0; c < m.channels; c += V::size()) {
          const int64_t n = std::min<int64_t>(V::size(), m.channels - c);
          load_weights(wp, bp, m.channels, c, n, false, w, bv);
          conv_row(m, gp + m.pixel(b, 0, 0), 0, w, bv, y, c, n, [&](int64_t x, V pre) {
            const int64_t p = m.pixel(b, y, x) + c;
            (gelu(pre) * V::loadu(vp + p, n)).store(op + p, n);
          });
        }
      }
    });
  });
  return out;
}

// The backward given grad_hidden = dL/dhidden: writes hidden (fc2's input, for its weight gradient), dL/dgate and
// dL/dvalue into the tensors given (each may be empty: not wanted) and returns [dL/dweight (C, 1, 3, 3), dL/dbias
// (C)]. One task per band of rows of an image: it computes dL/d(conv output) for its rows and one row each side
// (the halo the transposed conv reads), keeps them in a band-sized buffer, and from them writes dL/dgate for its
// rows and its share of the weight and bias gradients, summed over the tasks in a fixed order (results do not
// depend on the number of threads).
std::vector<torch::Tensor> convglu_backward(torch::Tensor gate, torch::Tensor value, torch::Tensor grad_hidden,
                                            torch::Tensor weight, torch::Tensor bias, int64_t height, int64_t width,
                                            torch::Tensor hidden, torch::Tensor grad_gate, torch::Tensor grad_value) {
  const Map m = map_of(gate, height, width);
  check(gate, gate, "gate");
  check_same(value, gate, "value");
  check_same(grad_hidden, gate, "grad_hidden");
  for (auto* t : {&hidden, &grad_gate, &grad_value})
    if (t->numel()) {
      check_same(*t, gate, "an output");
      check_apart(*t, {&gate, &value, &grad_hidden, &weight, &bias});
    }
  if (hidden.numel() && grad_gate.numel()) at::assert_no_overlap(hidden, grad_gate);
  if (hidden.numel() && grad_value.numel()) at::assert_no_overlap(hidden, grad_value);
  if (grad_gate.numel() && grad_value.numel()) at::assert_no_overlap(grad_gate, grad_value);
  const torch::Tensor taps = taps_of(weight, bias, gate);
  const int64_t c_all = m.channels;
  const int64_t band = std::clamp<int64_t>(kBandElements / std::max<int64_t>(1, m.width * c_all), 1, m.height);
  const int64_t bands = (m.height + band - 1) / band, tasks = m.batch * bands;
  // per task: 9 weight-gradient rows and the bias gradient's, each C wide
  auto partial = torch::zeros({tasks, 10, c_all}, gate.options());
  AT_DISPATCH_FLOATING_TYPES(gate.scalar_type(), "convglu_backward", [&] {
    using V = Vectorized<scalar_t>;
    const scalar_t *gp = gate.data_ptr<scalar_t>(), *vp = value.data_ptr<scalar_t>();
    const scalar_t* ghp = grad_hidden.data_ptr<scalar_t>();
    const scalar_t *wp = taps.data_ptr<scalar_t>(), *bp = bias.numel() ? bias.data_ptr<scalar_t>() : nullptr;
    scalar_t* hp = hidden.numel() ? hidden.data_ptr<scalar_t>() : nullptr;
    scalar_t* ggp = grad_gate.numel() ? grad_gate.data_ptr<scalar_t>() : nullptr;
    scalar_t* gvp = grad_value.numel() ? grad_value.data_ptr<scalar_t>() : nullptr;
    scalar_t* pp = partial.data_ptr<scalar_t>();
    at::parallel_for(0, tasks, 1, [&](int64_t begin, int64_t end) {
      std::vector<scalar_t> grad_conv((band + 2) * m.width * c_all);  // dL/d(conv output), rows lo .. hi
      V w[9], bv;
      for (int64_t task = begin; task < end; ++task) {
        const int64_t b = task / bands, y0 = (task % bands) * band, y1 = std::min(y0 + band, m.height);
        const int64_t lo = std::max<int64_t>(y0 - 1, 0), hi = std::min(y1 + 1, m.height);
        for (int64_t c = 0; c < c_all; c += V::size()) {
          const int64_t n = std::min<int64_t>(V::size(), c_all - c);
          load_weights(wp, bp, c_all, c, n, false, w, bv);
          for (int64_t y = lo; y < hi; ++y) {
            const bool own = y >= y0 && y < y1;
            scalar_t* gc = grad_conv.data() + (y - lo) * m.width * c_all + c;
            conv_row(m, gp + m.pixel(b, 0, 0), 0, w, bv, y, c, n, [&](int64_t x, V pre) {
              const int64_t p = m.pixel(b, y, x) + c;
              V act, slope;
              gelu_and_slope(pre, act, slope);
              const V gh = V::loadu(ghp + p, n), v = V::loadu(vp + p, n);
              (gh * v * slope).store(gc + x * c_all, n);
              if (own && hp) (act * v).store(hp + p, n);
              if (own && gvp) (gh * act).store(gvp + p, n);
            });
          }
        }
        // dL/dgate at (y, x) = sum over the taps (i, j) of weight[i, j] x dL/dconv at (y - i + 1, x - j + 1): the
        // conv of dL/dconv with the mirrored weights, no bias
        if (ggp) {
          for (int64_t c = 0; c < c_all; c += V::size()) {
            const int64_t n = std::min<int64_t>(V::size(), c_all - c);
            load_weights(wp, static_cast<const scalar_t*>(nullptr), c_all, c, n, true, w, bv);
            for (int64_t y = y0; y < y1; ++y)
              conv_row(m, grad_conv.data(), lo, w, bv, y, c, n,
                       [&](int64_t x, V sum) { sum.store(ggp + m.pixel(b, y, x) + c, n); });
          }
        }
        // dL/dweight[tap] = sum over the band's own pixels of dL/dconv x gate at the tap's offset; dL/dbias =
        // sum of dL/dconv. Channels outermost, so the 10 accumulators stay in registers across the band.
        scalar_t* part = pp + task * 10 * c_all;
        for (int64_t c = 0; c < c_all; c += V::size()) {
          const int64_t n = std::min<int64_t>(V::size(), c_all - c);
          V acc[10];
          for (auto& a : acc) a = V(scalar_t(0));
          for (int64_t y = y0; y < y1; ++y)
            for (int64_t x = 0; x < m.width; ++x) {
              const V gc = V::loadu(grad_conv.data() + ((y - lo) * m.width + x) * c_all + c, n);
              const scalar_t* pixel = gp + m.pixel(b, y, x) + c;
              acc[9] = acc[9] + gc;
              for_taps(m, y, x, [&](int64_t tap, int64_t offset) {
                acc[tap] = at::vec::fmadd(gc, V::loadu(pixel + offset, n), acc[tap]);
              });
            }
          for (int64_t t = 0; t < 10; ++t) acc[t].store(part + t * c_all + c, n);
        }
      }
    });
  });
  auto summed = partial.sum(0);  // (10, C), the tasks' partial sums in a fixed order
  return {summed.narrow(0, 0, 9).t().reshape({c_all, 1, 3, 3}).contiguous(), summed[9].contiguous()};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  // without the GIL while they run, as ATen's own ops: other Python threads (a data loader's) go on meanwhile
  m.def("convglu_forward", &convglu_forward, py::call_guard<py::gil_scoped_release>());
  m.def("convglu_backward", &convglu_backward, py::call_guard<py::gil_scoped_release>());
}
