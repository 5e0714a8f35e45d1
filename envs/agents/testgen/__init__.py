"""The generation agent's environment: coverage-guided test-input generation (fuzzing) for real parsers.

The agent schedules a mutational fuzzer: which mutation schedule (a mix of byte-level operators) to play
next, and on which inputs, rewarded by the new arc coverage its executions reach. Trained on some parsers, it is
scored on a held-out one against random and greedy schedulers and against Google's Atheris. Modules, in data-flow
order:

* `programs`: the table of programs under test (public API calls, documented errors, seed inputs);
* `coverage_tracer`: arc coverage of one execution with coverage.py's C tracer;
* `findings`: crashes (undocumented exceptions) deduplicated by type and site;
* `mutators`: the operators, the schedules, the auto-dictionary and the action table;
* `harness`: one program warmed up and measured the same way in the env and in Atheris' process;
* `config`, `env`: the env_config model and the Gymnasium environment;
* `baselines`, `atheris_peer`, `evaluate`: out-of-sample scoring against the baselines and Atheris.

coverage.py is driven through an internal API (`coverage.tracer.CTracer`), so it must be pinned exactly
(coverage==7.17.4, the version this was written against).
"""
