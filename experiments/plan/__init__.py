"""Where and how a run executes, settled before Ray starts: preflight (the --dry-run), placement of a listing's
experiments on one machine, which Ray cluster, a local Ray on loopback, and what machine produced the numbers."""
