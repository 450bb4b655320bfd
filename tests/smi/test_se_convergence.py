"""The SE iteration's stopping rule and accelerations (core/smi/se.py) on deterministic maps whose fixed
points are known in closed form: the sampled SE map is replaced by a map Q -> Q_new with
Q_new_ii = f_i(Q_ii) (diagonal), so the test checks the iteration logic, not the channel."""

import numpy as np
import pytest

from seqphase.core.smi import se as sse


class _Fake:
    p = 2
    T = 2


def _install(monkeypatch, maps):
    """Make qhat return the Qhat whose prior step is diag(f_i(diag Q))."""

    def qhat(channel, Q, alpha, draws, eps=1e-3):
        target = np.array([f(np.diag(Q)) for f in maps])
        return np.diag(target / (1.0 - target))

    monkeypatch.setattr(sse, "qhat", qhat)


def test_slow_linear_convergence_lands_within_tol(monkeypatch):
    # x -> x* + r (x - x*) with r = 0.995: a stop on |change| < tol would end 1e-5 / 0.005 = 2e-3 short
    r, x_star = 0.995, 0.3
    _install(monkeypatch, [lambda q: x_star + r * (q[0] - x_star), lambda q: 0.9 + 0.5 * (q[1] - 0.9)])
    st = sse.smi_se(_Fake(), 1.0, None, Q0=0.05 * np.eye(2), damping=0.0, tol=1e-5, max_iter=300)
    assert st.converged
    assert abs(st.Q[0, 0] - x_star) < 1e-4
    assert abs(st.Q[1, 1] - 0.9) < 1e-4
    # Aitken extrapolation: far fewer iterations than log(2e-3 / 0.25) / log(r) ~ 1000
    assert st.n_iter < 120


def test_unstable_zero_is_left_for_the_stable_branch(monkeypatch):
    # the staircase in miniature: the second entry converges to 0.9 (ratio 0.7); the first follows a
    # pitchfork x -> r x / (1 + b x) whose slope r = 1.05 q2 / 0.9 exceeds 1 only once q2 is nearly
    # converged, so it first decays to the floor and must then regrow to x* = (r - 1) / b = 0.1
    b = 0.5
    _install(monkeypatch, [lambda q: 1.05 * q[1] / 0.9 * q[0] / (1.0 + b * q[0]), lambda q: 0.9 + 0.7 * (q[1] - 0.9)])
    st = sse.smi_se(_Fake(), 1.0, None, Q0=0.05 * np.eye(2), damping=0.0, tol=1e-5, max_iter=600)
    assert st.converged
    assert st.Q[0, 0] == pytest.approx(0.05 / b, abs=2e-4)


def test_stable_zero_stays_at_the_floor(monkeypatch):
    _install(monkeypatch, [lambda q: 0.9 * q[0], lambda q: 0.5])
    st = sse.smi_se(_Fake(), 1.0, None, Q0=0.05 * np.eye(2), damping=0.0, tol=1e-5, max_iter=300)
    assert st.converged
    assert st.Q[0, 0] <= 1e-8 + 1e-15
    assert st.Q[1, 1] == pytest.approx(0.5, abs=1e-9)


def test_frozen_layer_is_not_floored(monkeypatch):
    _install(monkeypatch, [lambda q: 0.9 * q[0], lambda q: 0.5])
    st = sse.smi_se(_Fake(), 1.0, None, Q0=np.diag([0.0, 0.05]), damping=0.0, tol=1e-5, max_iter=300, freeze=[0])
    assert st.Q[0, 0] == 0.0


class _FakeDraws:
    """n draws; the fake map's fixed point depends on n like a Monte Carlo estimate would."""

    def __init__(self, n):
        self.xi = np.zeros((n, 2, 2))

    def head(self, n):
        return _FakeDraws(n)


def test_coarse_stage_lands_on_the_fine_fixed_point(monkeypatch):
    """coarse = 8: the transient runs on n/8 draws, whose map has another fixed point (x* + 0.3/sqrt(n)),
    then the iteration goes on with all n: the result is the n-draw fixed point to tol, with fewer
    iterations on the n-draw map than without the coarse stage (it starts 0.012 from the fixed point
    instead of 0.36: ~90 iterations at rate 0.9 instead of ~120)."""
    r = 0.9

    def qhat(channel, Q, alpha, draws, eps=1e-3):
        x_star = 0.4 + 0.3 / np.sqrt(draws.xi.shape[0])
        target = x_star + r * (np.diag(Q) - x_star)
        return np.diag(target / (1.0 - target))

    monkeypatch.setattr(sse, "qhat", qhat)
    draws = _FakeDraws(2048)
    plain = sse.smi_se(_Fake(), 1.0, draws, Q0=0.05 * np.eye(2), damping=0.0, tol=1e-6, max_iter=500,
                       accelerate=False)
    fast = sse.smi_se(_Fake(), 1.0, draws, Q0=0.05 * np.eye(2), damping=0.0, tol=1e-6, max_iter=500,
                      accelerate=False, coarse=8)
    x_fine = 0.4 + 0.3 / np.sqrt(2048)
    assert plain.converged and fast.converged
    assert np.allclose(np.diag(fast.Q), x_fine, atol=1e-6) and np.allclose(np.diag(plain.Q), x_fine, atol=1e-6)
    assert fast.n_coarse > 0 and fast.n_iter - fast.n_coarse < plain.n_iter - 20
    assert len(fast.history) == fast.n_iter + 1


def test_coarse_stage_leaves_the_fine_stage_half_the_budget(monkeypatch):
    """A coarse map that never settles (here: one entry creeps up by 0.2% per iteration on the coarse draws
    only) stops after max_iter / 2 iterations, and the fine stage still converges."""
    def qhat(channel, Q, alpha, draws, eps=1e-3):
        q = np.diag(Q).copy()
        target = np.minimum(q * 1.002, 0.9) if draws.xi.shape[0] < 2048 else 0.3 + 0.5 * (q - 0.3)
        return np.diag(target / (1.0 - target))

    monkeypatch.setattr(sse, "qhat", qhat)
    st = sse.smi_se(_Fake(), 1.0, _FakeDraws(2048), Q0=0.05 * np.eye(2), damping=0.0, tol=1e-6, max_iter=100,
                    accelerate=False, coarse=8)
    assert st.n_coarse == 50 and st.converged and np.allclose(np.diag(st.Q), 0.3, atol=1e-6)


def test_anderson_lands_within_tol_in_a_few_iterations(monkeypatch):
    # the slow map of the first test: Anderson's secants solve its linear error in a few steps (the plain
    # rule with Aitken needs tens) and the result is the same fixed point to tol
    r, x_star = 0.995, 0.3
    _install(monkeypatch, [lambda q: x_star + r * (q[0] - x_star), lambda q: 0.9 + 0.5 * (q[1] - 0.9)])
    st = sse.smi_se(_Fake(), 1.0, None, Q0=0.05 * np.eye(2), damping=0.0, tol=1e-5, max_iter=300, anderson=3)
    assert st.converged
    assert abs(st.Q[0, 0] - x_star) < 1e-5 and abs(st.Q[1, 1] - 0.9) < 1e-5
    assert st.n_iter <= 10


def test_anderson_and_growth_secant_keep_the_stable_branch(monkeypatch):
    # the pitchfork of the second test: Q11 decays towards the unstable 0 first, then must regrow to 0.1;
    # the extrapolations may not stop it at (or pull it onto) Q11 = 0, and the growth secant reaches x*
    # in fewer iterations than the plain iteration
    b = 0.5
    _install(monkeypatch, [lambda q: 1.05 * q[1] / 0.9 * q[0] / (1.0 + b * q[0]), lambda q: 0.9 + 0.7 * (q[1] - 0.9)])
    plain = sse.smi_se(_Fake(), 1.0, None, Q0=0.05 * np.eye(2), damping=0.0, tol=1e-5, max_iter=600)
    st = sse.smi_se(_Fake(), 1.0, None, Q0=0.05 * np.eye(2), damping=0.0, tol=1e-5, max_iter=600, anderson=3)
    assert st.converged
    assert st.Q[0, 0] == pytest.approx(0.05 / b, abs=1e-4)
    assert st.n_iter < plain.n_iter


def test_anderson_keeps_a_stable_zero_at_the_floor(monkeypatch):
    _install(monkeypatch, [lambda q: 0.9 * q[0], lambda q: 0.5 + 0.3 * (q[1] - 0.5)])
    st = sse.smi_se(_Fake(), 1.0, None, Q0=0.05 * np.eye(2), damping=0.0, tol=1e-5, max_iter=300, anderson=3)
    assert st.converged
    assert st.Q[0, 0] <= 1e-5
    assert st.Q[1, 1] == pytest.approx(0.5, abs=1e-5)


def test_growth_secant_moves_a_logistic_entry_ahead():
    # x -> x (1 + a - b x): rho(x) = 1 + a - b x is linear, so the secant through two growing pairs lands
    # on x* = a / b, capped at 4 times the image
    a, b = 0.1, 2.0
    f = lambda x: x * (1.0 + a - b * x)
    xs = [np.diag([x, 0.5]) for x in (0.01, 0.012)]
    gs = [np.diag([f(x), 0.5]) for x in (0.01, 0.012)]
    out = sse._grow_secant(xs, gs, [0, 1], 1e-3)
    assert out[0] == pytest.approx(min(a / b, 4.0 * f(0.012)), rel=1e-9)
    assert out[1] == 0.5
    xs = [np.diag([x, 0.5]) for x in (0.02, 0.024)]
    gs = [np.diag([f(x), 0.5]) for x in (0.02, 0.024)]
    assert sse._grow_secant(xs, gs, [0, 1], 1e-3)[0] == pytest.approx(a / b, rel=1e-9)


def _coupled(r):
    """A map whose fixed point and Jacobian depend on the number of draws m like a Monte Carlo estimate:
    x -> x*(m) + A(m) (x - x*(m)) on (Q11, Q22), A with spectral radius ~r (slow: near a threshold).
    Returns the fake qhat and the fixed point of the 2048-draw map."""

    def parts(m):
        shift = 0.3 / np.sqrt(m)
        return np.array([0.4 + shift, 0.9 - 0.1 * shift]), np.array([[r, 0.05], [0.02, 0.5]]) * (1.0 + shift)

    def qhat(channel, Q, alpha, draws, eps=1e-3):
        x_star, A = parts(draws.xi.shape[0])
        target = x_star + A @ (np.diag(Q) - x_star)
        return np.diag(target / (1.0 - target))

    return qhat, parts(2048)[0]


def test_newton_stage_lands_on_the_fine_fixed_point_in_a_few_evaluations(monkeypatch):
    """newton = True: from the coarse fixed point, steps with the coarse map's Jacobian (which differs from
    the fine one as a Monte Carlo estimate would) reach the fine fixed point to tol in at most 4 fine
    evaluations at a slope 0.98 of the map (no more than the secants, which are exact on an affine map)."""
    qhat, x_star = _coupled(0.98)
    monkeypatch.setattr(sse, "qhat", qhat)
    kw = dict(Q0=0.05 * np.eye(2), damping=0.0, tol=1e-6, max_iter=300, coarse=8, anderson=3)
    plain = sse.smi_se(_Fake(), 1.0, _FakeDraws(2048), **kw)
    fast = sse.smi_se(_Fake(), 1.0, _FakeDraws(2048), newton=True, **kw)
    assert fast.converged and plain.converged
    assert np.allclose(np.diag(fast.Q), x_star, atol=1e-5)
    assert fast.n_coarse == plain.n_coarse
    assert fast.n_iter - fast.n_coarse <= min(4, plain.n_iter - plain.n_coarse)
    assert len(fast.history) >= fast.n_iter + 1


def test_newton_stage_hands_a_growing_layer_back(monkeypatch):
    """The coarse map keeps Q11 at its stable 0 (slope 0.95), the fine map's zero is unstable (slope 1.05,
    a layer just above its threshold): Q11 is not a Newton key (below 1e-3), its growth hands the stage
    back to the plain rules, and the SE lands on the fine map's learned branch x* = 0.05 / b."""
    b = 0.5

    def qhat(channel, Q, alpha, draws, eps=1e-3):
        slope = 1.05 if draws.xi.shape[0] == 2048 else 0.95
        q = np.diag(Q)
        target = np.array([slope * q[0] / (1.0 + b * q[0]), 0.9 + 0.7 * (q[1] - 0.9)])
        return np.diag(target / (1.0 - target))

    monkeypatch.setattr(sse, "qhat", qhat)
    st = sse.smi_se(_Fake(), 1.0, _FakeDraws(2048), Q0=0.05 * np.eye(2), damping=0.0, tol=1e-5, max_iter=600,
                    coarse=8, anderson=3, newton=True)
    assert st.converged
    assert st.Q[0, 0] == pytest.approx(0.05 / b, abs=1e-4)
    assert st.Q[1, 1] == pytest.approx(0.9, abs=1e-5)
