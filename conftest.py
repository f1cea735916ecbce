"""Helpers shared by the tests (pytest puts this directory on sys.path: `from conftest import rel`)."""


def rel(a, b):
    """Relative error |a - b| / |b| in float64 on the CPU (any dtype, any device)."""
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()
