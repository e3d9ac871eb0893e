# Sweep definition: the learning-rate robustness experiment (paper §3.3 / Fig. 9). Every point is one
# run of the base recipe with the keys below set; list them with harness.core.config.sweep_points(cfg) and run one as
#   depthbench train configs/horesnet/horesnet86-euler_1xb128-260e_cifar10.py model.name=... optim.lr=...
# Paper: Euler diverges at lr >= 0.13; mid-point converges up to ~0.2; RK4 at 0.23; Verner at 0.4 "or above".
# (RK4 uses the 82-layer net of Table 3, ×10 blocks; §3.3's "7" is an error.) Milestones/gamma unchanged; fp32.
_base_ = ['./horesnet86-euler_1xb128-260e_cifar10.py']
sweep = dict(
    axes={
        'model.name': ['horesnet86_euler', 'horesnet86_midpoint', 'horesnet82_rk4', 'horesnet86_verner'],
        'optim.lr': [0.05, 0.1, 0.13, 0.15, 0.2, 0.23, 0.25, 0.3, 0.4, 0.5],  # suggested grid (not in the paper)
    },
    # diverged: the run stops with a non-finite loss (status "failed"), or train_top1 <= 15 after 5 epochs
    divergence=dict(max_train_top1=15.0, after_epochs=5),
    # budget option (a harness deviation, label it so): classify with epochs=30, run full schedules at the boundary
    short_epochs=30,
)
