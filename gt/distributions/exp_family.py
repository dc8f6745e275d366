"""``ExponentialFamily`` (``torch.distributions.exp_family``): the base class of distributions
with density ``p(x; theta) = exp(<t(x), theta> - F(theta) + k(x))``, and their generic entropy
and same-family KL divergence through the Bregman divergence of the log normalizer ``F`` (Nielsen
and Nock), differentiated by autograd."""

from __future__ import annotations

from typing import Any

from gt.backprop import grad
from gt.distributions.distribution import Distribution
from gt.grad_mode import enable_grad
from gt.tensor import Tensor

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    """A distribution of an exponential family. A subclass gives its natural parameters
    ``theta`` (:attr:`_natural_params`), its log normalizer ``F`` (:meth:`_log_normalizer`, a
    function of them) and the expected carrier measure ``E[k(x)]``
    (:attr:`_mean_carrier_measure`); :meth:`entropy` is then
    ``F(theta) - <theta, grad F(theta)> - E[k(x)]``. Those whose entropy has a closed form
    override it (as in PyTorch); the generic one is a check of them."""

    @property
    def _natural_params(self) -> tuple[Tensor, ...]:
        """The natural parameters ``theta``, a tuple of tensors."""
        raise NotImplementedError

    def _log_normalizer(self, *natural_params: Tensor) -> Tensor:
        """The log normalizer ``F(theta)``, one value per batch entry."""
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self) -> Any:
        """The expected carrier measure ``E[k(x)]`` (needed by :meth:`entropy`)."""
        raise NotImplementedError

    def entropy(self) -> Tensor:
        """The entropy from the Bregman divergence of the log normalizer (differentiable: the
        gradient of ``F`` is taken with ``create_graph=True``)."""
        result: Any = -self._mean_carrier_measure
        with enable_grad():
            nparams = [p.detach().requires_grad_() for p in self._natural_params]
            lg_normal = self._log_normalizer(*nparams)
            gradients = grad(lg_normal.sum(), nparams, create_graph=True)
        result = result + lg_normal
        for param, g in zip(nparams, gradients):
            result = result - (param * g).reshape(tuple(self._batch_shape) + (-1,)).sum(-1)
        return result
