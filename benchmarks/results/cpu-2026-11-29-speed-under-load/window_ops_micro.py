import sys, time, statistics, torch
import torch.nn.functional as F
sys.path.insert(0, '.')
import models.transnext as T
torch.set_num_threads(1)
b, h, d, H, W, k = 8, 3, 24, 56, 56, 3
q = torch.randn(b, h, d, H*W); kk = torch.randn(b, h, d, H*W); a = torch.randn(b, h, k*k, H*W)

def padded2(t, height, width, r):
    x = t.unflatten(-1, (height, width))
    out = t.new_empty(*t.shape[:-1], height + 2*r, width + 2*r)
    out[..., :r, :].zero_(); out[..., height + r:, :].zero_()
    out[..., r:height + r, :r].zero_(); out[..., r:height + r, width + r:].zero_()
    out[..., r:height + r, r:width + r].copy_(x)
    return out

def av_old(attn, value, height, width, window):
    return T.window_av(attn, value, height, width, window)

def av_new(attn, value, height, width, window):
    b, h, d, n = value.shape
    a = attn.to(value.dtype).contiguous().unflatten(-1, (height, width)).unsqueeze(3)
    v = padded2(value, height, width, window // 2)
    offs = T._offsets(window)
    _, i, j = offs[0]
    out = a[:, :, 0] * v[..., i:i + height, j:j + width]
    for o, i, j in offs[1:]:
        out.addcmul_(a[:, :, o], v[..., i:i + height, j:j + width])
    return out.view(b, h, d, n)

def qk_new(query, key, height, width, window):
    b, h, d, n = query.shape
    qq = query.unflatten(-1, (height, width))
    k2 = padded2(key, height, width, window // 2)
    out = query.new_empty(b, h, window * window, height, width)
    for o, i, j in T._offsets(window):
        torch.sum(qq * k2[..., i:i + height, j:j + width], dim=2, out=out[:, :, o])
    return out.view(b, h, window * window, n)

def qk_tmp(query, key, height, width, window):
    b, h, d, n = query.shape
    qq = query.unflatten(-1, (height, width))
    k2 = padded2(key, height, width, window // 2)
    out = query.new_empty(b, h, window * window, height, width)
    tmp = torch.empty_like(qq)
    for o, i, j in T._offsets(window):
        torch.mul(qq, k2[..., i:i + height, j:j + width], out=tmp)
        torch.sum(tmp, dim=2, out=out[:, :, o])
    return out.view(b, h, window * window, n)

assert torch.equal(T.window_qk(q, kk, H, W, k), qk_tmp(q, kk, H, W, k))
assert torch.equal(av_old(a, kk, H, W, k), av_new(a, kk, H, W, k))
assert torch.equal(T.window_qk(q, kk, H, W, k), qk_new(q, kk, H, W, k))
fns = {"qk": lambda: T.window_qk(q, kk, H, W, k), "qk_new": lambda: qk_new(q, kk, H, W, k), "qk_tmp": lambda: qk_tmp(q, kk, H, W, k),
       "av": lambda: av_old(a, kk, H, W, k), "av_new": lambda: av_new(a, kk, H, W, k),
       "pad": lambda: T._padded(kk, H, W, 1), "pad_new": lambda: padded2(kk, H, W, 1)}
for f in fns.values(): f()
t = {n: [] for n in fns}
for r in range(int(sys.argv[1])):
    for n, f in (list(fns.items()) if r % 2 == 0 else list(fns.items())[::-1]):
        s = time.perf_counter(); f(); t[n].append(time.perf_counter() - s)
print({n: round(1e3 * statistics.median(v), 1) for n, v in t.items()})
for x in ("qk", "av", "pad"):
    print(x, "speed-up", round(statistics.median([o / n for o, n in zip(t[x], t[x + "_new"])]), 3))
