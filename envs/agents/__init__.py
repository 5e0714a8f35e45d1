"""Environments for the agents of the test-automation system (no Ray imports here).

Each agent of the user's test-automation pipeline gets its own Gymnasium environment
package; `testprio` is the execution agent's: ordering CI test suites so failures show
up early.
"""
