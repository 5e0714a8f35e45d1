"""What a run keeps between processes: the storage root (a folder or s3://), the sweep's resume state and whether
it can be resumed, checkpoint pruning, and dated versions of a bars dataset."""
