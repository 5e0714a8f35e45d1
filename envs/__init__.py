"""Gymnasium environments (no Ray imports here)."""
