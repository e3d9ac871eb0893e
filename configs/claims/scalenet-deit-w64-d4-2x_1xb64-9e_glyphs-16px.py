# ScaleNet Table VII at reduced scale: the expanded model of scalenet-deit-w64-d4-2x_1xb64-3e_glyphs-16px.py from a
# random initialisation, trained 9 epochs -- three times the expanded arm's 3, as the paper's scratch model has 300
# epochs against ScaleNet's 100.
_base_ = ['./scalenet-deit-w64-d4-2x_1xb64-3e_glyphs-16px.py']
epochs = 9
