"""Environments for the agents of the test-automation system (no Ray imports here).

Each agent of the user's test-automation pipeline gets its own Gymnasium environment
package: `testprio` is the execution agent's (ordering CI test suites so failures show
up early), `testgen` the generation agent's (scheduling a coverage-guided fuzzer that
writes test inputs for real parsers). The requirements agent has none: no real data for
it was found (docs/testgen.md, "The requirements agent").
"""
