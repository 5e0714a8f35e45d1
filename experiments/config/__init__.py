"""Reading an experiment: YAML files and their `extends:` deltas, --set overrides, the strict model, search-space
and result-key checks, the evaluation protocol, listings of several experiments. Nothing here starts Ray."""
