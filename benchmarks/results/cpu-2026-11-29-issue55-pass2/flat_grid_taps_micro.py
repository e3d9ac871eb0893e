import sys, time, torch
from pathlib import Path; sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from models.transnext import window_qk, window_av, _padded
torch.set_num_threads(1)
K=3; r=1
def pad_flat(t, H, W):
    # (B,h,c,N) -> (B,h,c,L) flat padded grid with r margin each end, zeros outside the map
    Wp, Hp = W+2*r, H+2*r
    out = t.new_zeros(*t.shape[:-1], Hp*Wp + 2*r)
    out[..., r:r+Hp*Wp].view(*t.shape[:-1], Hp, Wp)[..., r:r+H, r:r+W].copy_(t.unflatten(-1,(H,W)))
    return out
def band_of(t, H, W):
    Wp = W+2*r
    out = t.new_zeros(*t.shape[:-1], H, Wp)
    out[..., r:r+W].copy_(t.unflatten(-1,(H,W)))
    return out.flatten(-2)
def qk_band(qb, kf, H, W):
    Wp = W+2*r; L = H*Wp
    b,h,d,_ = qb.shape
    out = qb.new_empty(b,h,K*K,L); prod = torch.empty_like(qb)
    for o in range(K*K):
        i,j = divmod(o,K); s = i*Wp + j  # start of the shifted band in kf: r + (r + i - r)*Wp + (j - r) ... 
        torch.mul(qb, kf[..., s: s+L], out=prod)
        torch.sum(prod, dim=2, out=out[:,:,o])
    return out
def av_band(ab, vf, H, W):
    Wp = W+2*r; L = H*Wp
    out = ab[:,:,0:1]*vf[..., 0:L]
    for o in range(1,K*K):
        i,j = divmod(o,K); s = i*Wp+j
        out.addcmul_(ab[:,:,o:o+1], vf[..., s:s+L])
    return out
def t(f, n=3):
    best=1e9
    for _ in range(n):
        a=time.process_time(); f(); best=min(best, time.process_time()-a)
    return best*1e3
for (B,h,H) in [(8,3,56),(8,6,28),(8,12,14),(8,24,7)]:
    W=H; d=24; N=H*W
    q=torch.randn(B,h,d,N); k=torch.randn(B,h,d,N); v=torch.randn(B,h,d,N); a=torch.randn(B,h,9,N)
    # correctness
    kf=pad_flat(k,H,W); qb=band_of(q,H,W); vf=pad_flat(v,H,W); ab=band_of(a,H,W)
    ref=window_qk(q,k,H,W,3); got=qk_band(qb,kf,H,W).view(B,h,9,H,W+2)[..., 1:1+W].flatten(-2)
    assert torch.allclose(ref,got,atol=1e-4), (ref-got).abs().max()
    ref=window_av(a,v,H,W,3); got=av_band(ab,vf,H,W).view(B,h,d,H,W+2)[..., 1:1+W].flatten(-2)
    assert torch.allclose(ref,got,atol=1e-4), (ref-got).abs().max()
    res={}
    for rnd in range(3):
        for name,f in [('qk cur',lambda: window_qk(q,k,H,W,3)),('qk band',lambda: qk_band(qb,kf,H,W)),
                       ('av cur',lambda: window_av(a,v,H,W,3)),('av band',lambda: av_band(ab,vf,H,W)),
                       ('pad cur',lambda: _padded(k,H,W,1)),('pad flat',lambda: pad_flat(k,H,W))]:
            res.setdefault(name,[]).append(t(f,2))
    print(H, {k_: round(min(v_),1) for k_,v_ in res.items()})
