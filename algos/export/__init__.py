"""Serving without torch or Ray: the numpy policy an algorithm exports (`numpy_policy`), the MLP nets it runs one row
at a time (`mlp_numpy`), a torch net's layers as its ops (`torch_layers`), and an ensemble of such policies as one
(`ensemble_policy`)."""
