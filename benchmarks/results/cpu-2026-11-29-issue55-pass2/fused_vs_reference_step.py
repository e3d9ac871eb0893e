import sys, time, torch, timm
from pathlib import Path; sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import models.transnext as T
torch.set_num_threads(1)
torch.manual_seed(0)
bs=int(sys.argv[1]) if len(sys.argv)>1 else 8
mode=sys.argv[2] if len(sys.argv)>2 else 'train'
rounds=int(sys.argv[3]) if len(sys.argv)>3 else 3
m=timm.create_model('transnext_tiny').train()
x=torch.randn(bs,3,224,224); y=torch.randint(0,1000,(bs,))
opt=torch.optim.SGD(m.parameters(), lr=0.0, momentum=0.9)
def set_fused(f): T.AggregatedAttention.fused_window=f
def step():
    if mode=='train':
        loss=torch.nn.functional.cross_entropy(m(x),y); loss.backward(); opt.step(); opt.zero_grad()
    else:
        with torch.inference_mode(): m.eval()(x); m.train()
# equality
set_fused(False); m.eval()
with torch.no_grad(): r=m(x[:2])
set_fused(True)
with torch.no_grad(): f=m(x[:2])
print('logits max diff', (r-f).abs().max().item(), 'scale', r.abs().max().item()); m.train()
for f_ in (True,False): set_fused(f_); step()
res={True:[],False:[]}
for rnd in range(rounds):
    for f_ in ((True,False) if rnd%2==0 else (False,True)):
        set_fused(f_); t=time.process_time(); w=time.perf_counter(); step(); res[f_].append((time.process_time()-t, time.perf_counter()-w))
import statistics as st
for f_ in res: print('fused' if f_ else 'ref  ', 'cpu', [round(a,3) for a,_ in res[f_]], 'wall', [round(b,3) for _,b in res[f_]])
ratios=[b[0]/a[0] for a,b in zip(res[True],res[False])]
print('ref/fused cpu-time per round', [round(r,3) for r in ratios], 'median', round(st.median(ratios),3))
