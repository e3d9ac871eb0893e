# TransNeXt Table 2 (SRA -> PFA) at reduced scale: transnext-s123-aggregated_1xb64-2e_glyphs.py with the window of
# stages 1-3 shrunk to the query itself (1x1): each query sees itself and the pooled map -- spatial-reduction
# attention plus the query's own token.
_base_ = ['./transnext-s123-aggregated_1xb64-2e_glyphs.py']
model = dict(window_size=(1, 1, 1, None))
