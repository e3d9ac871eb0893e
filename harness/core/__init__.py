"""The bottom layer every package may use: errors and exit codes, atomic file writing, the run-directory
contract, the config language. Imports nothing of depthbench's but itself."""
