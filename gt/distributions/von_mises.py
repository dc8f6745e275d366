""":class:`VonMises`: the circular normal distribution (``torch.distributions.VonMises``).

``log_prob`` and ``variance`` use GT's exponentially scaled Bessel functions ``i0e``/``i1e``
(PyTorch uses a polynomial approximation of ``log I0`` good to about ``1e-7``, so the two agree
to that). ``sample`` is PyTorch's algorithm (Best and Fisher, 1979) in double precision on GT's
seeded uniforms, with a bounded number of rounds: each round draws several proposals per entry
at once and one sync point checks whether every entry has accepted one.
"""

from __future__ import annotations

import math
from typing import Any

from gt.distributions import constraints
from gt.distributions.distribution import Distribution
from gt.distributions.utils import broadcast_all
from gt.factories import rand, zeros
from gt.grad_mode import no_grad
from gt.ops.functional import where
from gt.special import i0e, i1e
from gt.tensor import Tensor

__all__ = ["VonMises"]

#: Proposals drawn per entry in one round, and rounds before giving up (the acceptance rate of
#: each proposal is at least about 0.66, so a failure is out of reach in practice).
_PROPOSALS_PER_ROUND = 4
_MAX_ROUNDS = 64


def _log_i0(x: Tensor) -> Tensor:
    return i0e(x).log() + x.abs()


class VonMises(Distribution):
    """The von Mises distribution of angles around ``loc`` with ``concentration`` ``kappa``.
    ``loc`` and values may be any real numbers and are read modulo ``2 pi``; ``mean`` and
    ``variance`` are the circular ones.

    Args:
        loc: the mean angle, in radians.
        concentration: ``kappa > 0``.
        validate_args: check the parameters (``None``: the default setting).
    """

    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc: Any, concentration: Any, validate_args: bool | None = None) -> None:
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(tuple(self.loc.shape), (), validate_args=validate_args)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        k = self.concentration
        return k * (value - self.loc).cos() - math.log(2 * math.pi) - _log_i0(k)

    @property
    def mean(self) -> Tensor:
        """The circular mean."""
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        """The circular variance ``1 - I1(kappa) / I0(kappa)``."""
        k = self.concentration
        return 1 - i1e(k) / i0e(k)

    def _proposal_r(self, kappa: Tensor) -> Tensor:
        tau = 1 + (1 + 4 * kappa.pow(2)).sqrt()
        rho = (tau - (2 * tau).sqrt()) / (2 * kappa)
        r = (1 + rho.pow(2)) / (2 * rho)
        return where(kappa < 1e-5, 1 / kappa + kappa, r)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        """Best and Fisher's rejection sampler (in double precision, as PyTorch).

        Raises:
            RuntimeError: some entry accepted none of its proposals in ``_MAX_ROUNDS`` rounds.
        """
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            loc = self.loc.to("float64").expand(shape)
            kappa = self.concentration.to("float64").expand(shape)
            r = self._proposal_r(kappa)
            x = zeros(shape, dtype="float64")
            done = zeros(shape, dtype="bool")
            for _ in range(_MAX_ROUNDS):
                u = rand((_PROPOSALS_PER_ROUND, 3, *shape), dtype="float64")
                for i in range(_PROPOSALS_PER_ROUND):
                    u1, u2, u3 = u[i, 0], u[i, 1], u[i, 2]
                    z = (math.pi * u1).cos()
                    f = (1 + r * z) / (r + z)
                    c = kappa * (r - f)
                    accept = ((c * (2 - c) - u2) > 0) | ((c / u2).log() + 1 - c >= 0)
                    take = accept & ~done
                    x = where(take, (u3 - 0.5).sign() * f.acos(), x)
                    done = done | accept
                if bool(done.all()):
                    result = (x + math.pi + loc) % (2 * math.pi) - math.pi
                    return result.to(self.loc.dtype)
        raise RuntimeError(
            f"VonMises.sample: no proposal accepted in {_MAX_ROUNDS * _PROPOSALS_PER_ROUND} tries"
        )
