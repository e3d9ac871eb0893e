# TransNeXt Table 9 (A-A-A-M against A-M-M-M) at reduced scale: transnext-s123-aggregated_1xb64-2e_glyphs.py with
# full multi-head self-attention in stages 2-3 (sr_ratio 1, no window): aggregated attention in stage 1 only.
_base_ = ['./transnext-s123-aggregated_1xb64-2e_glyphs.py']
model = dict(sr_ratios=(4, 1, 1, 1), window_size=(3, None, None, None))
