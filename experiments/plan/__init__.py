"""Where and how a run executes, settled before Ray starts: placement of a listing's experiments on one machine,
which Ray cluster, a local Ray on loopback, the run's clock, and what machine produced the numbers. The checks
`--dry-run` runs are experiments/api/preflight.py, which stands on this room."""
