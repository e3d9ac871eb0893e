"""The jobs that join the peers below them (docs/architecture.md, layer 6 beside slurm/): the demo -- pretraining
and fine-tuning runs, then the paper tables and report -- and the architecture audit with its dense rows, counted by
downstream/ for results/' audit. The commands call them; nothing below imports them."""
