"""The sandbox performs no real network, email or filesystem action (paper 000 §3.7): a full
replay of every committed suite runs with socket creation and file writes outside the output
folder made to raise."""

from __future__ import annotations

import builtins
import os
import socket

import pytest

from containmentbench.scenarios.selfcheck import check


class _NoNetwork(Exception):
    pass


@pytest.fixture
def sealed(monkeypatch, tmp_path):
    def no_socket(*a, **k):
        raise _NoNetwork("socket creation attempted")

    monkeypatch.setattr(socket, "socket", no_socket)
    monkeypatch.setattr(socket, "create_connection", no_socket)
    real_open = builtins.open

    def guarded_open(file, mode="r", *a, **k):
        if any(c in mode for c in "wax+"):
            path = os.path.abspath(os.fspath(file))
            if not path.startswith(str(tmp_path)):
                raise PermissionError(f"write outside the output folder: {path}")
        return real_open(file, mode, *a, **k)

    monkeypatch.setattr(builtins, "open", guarded_open)
    return tmp_path


def test_full_suite_replay_without_network_or_writes(sealed, full_main, stress):
    results = check(full_main + stress)
    assert all(r.ok for r in results)


def test_guard_is_effective(sealed):
    with pytest.raises(_NoNetwork):
        socket.socket()
    with pytest.raises(PermissionError), open("/tmp/containmentbench-should-not-exist", "w"):
        pass
