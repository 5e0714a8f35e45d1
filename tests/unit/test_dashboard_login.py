"""The dashboard URL comes with how to log in, never with the token itself.

Ray reads its authentication mode once per process (in its C++ config), so each case is a fresh process.
"""
from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO

PRINT = ("import io; from rich.console import Console; from experiments.plan.local_ray import print_dashboard; "
         "out = io.StringIO(); print_dashboard('127.0.0.1:8265', Console(file=out, width=200).print); "
         "print(out.getvalue())")


def dashboard_lines(**env: str) -> str:
    result = subprocess.run([sys.executable, "-c", PRINT], cwd=REPO, capture_output=True, text=True, timeout=120,
                            env={**os.environ, **env})
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_login_hint_names_the_command_not_the_token():
    planted = "planted-token-5f1c9e"
    text = dashboard_lines(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=planted)
    assert "Ray dashboard: http://127.0.0.1:8265" in text
    assert "get-auth-token" in text
    assert planted not in text


def test_no_hint_when_authentication_is_off():
    text = dashboard_lines(RAY_AUTH_MODE="disabled")
    assert "Ray dashboard: http://127.0.0.1:8265" in text
    assert "get-auth-token" not in text


def test_the_url_says_why_it_is_not_8265():
    from experiments.plan.local_ray import moved_note

    assert moved_note("127.0.0.1:8266", None) == " (8265 is taken, by another run here)"
    assert moved_note("127.0.0.1:8265", None) == ""
    assert moved_note("127.0.0.1:9000", 9000) == ""  # asked for with --dashboard-port
    assert moved_note("", None) == ""  # --no-dashboard
