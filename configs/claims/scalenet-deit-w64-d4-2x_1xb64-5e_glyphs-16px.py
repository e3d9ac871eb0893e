# ScaleNet at reduced scale, compute-matched: the expanded model from a random initialisation trained 5 epochs --
# the expanded arm's training compute including its source: 4 epochs of the 4-block model (half the block
# applications: ~2 epochs of the 8-application model) + 3 expanded epochs.
_base_ = ['./scalenet-deit-w64-d4-2x_1xb64-3e_glyphs-16px.py']
epochs = 5
