"""``gt.geqrf`` / ``Tensor.geqrf`` (LAPACK's compact Householder QR) and ``gt.ormqr`` /
``Tensor.ormqr`` (products with the ``Q`` those reflectors make) through a real cluster, against
values PyTorch 2.13 (CPU, MKL) gave for the same inputs (pasted below; made by
``torch.geqrf`` / ``torch.ormqr`` on the inputs :func:`_input` makes), with PyTorch's gradients
of ``ormqr``, its ``NotImplementedError`` for a backward pass through ``geqrf``, its node names
and its errors."""

from __future__ import annotations

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(120)


def _input(shape: tuple, dtype: str) -> np.ndarray:
    """A full-rank matrix (batch) with no randomness: ``sin`` of a quadratic in the index."""
    k = np.arange(int(np.prod(shape)))
    x = np.sin(k * k * 0.37 + k * 0.11 + 0.2).reshape(shape)
    if dtype.startswith("complex"):
        x = x + 1j * np.cos(k * k * 0.23 + 0.5).reshape(shape)
    return x.astype(dtype)


def _value(v: object) -> np.ndarray:
    """A pasted golden: a nested list, or a pair (real part, imaginary part)."""
    if isinstance(v, tuple):
        return np.asarray(v[0]) + 1j * np.asarray(v[1])
    return np.asarray(v)


# torch.geqrf(torch.from_numpy(_input(shape, dtype))) on torch 2.13: {(shape, dtype): (a, tau)}
GEQRF = {
    ((4, 3), "float64"): (
        [
            [-1.238921382539962, -0.0399790301120545, 0.018381803680929454],
            [-0.4578399568107938, -0.9217062466340115, -0.8839018744022743],
            [0.6949702690130474, -0.1445136950309618, 1.0946656234246883],
            [-0.17608758366768862, 0.4550641954981787, -0.31368918544004],
        ],
        [1.1603566889674317, 1.6287074276350189, 1.8208287982856708],
    ),
    ((3, 5), "float64"): (
        [
            [
                -0.8093686905362624,
                -0.048515271064943355,
                0.6218196154320408,
                -0.7612934521289345,
                0.3969627997352555,
            ],
            [
                -0.5396831264071537,
                -1.4307495115550857,
                -0.05293219167015112,
                0.01992777807971441,
                0.5570909848931216,
            ],
            [
                0.5608670170896266,
                0.15381404174318525,
                -1.2394104269380923,
                0.9633960943571906,
                -0.7036368439332105,
            ],
        ],
        [1.245462090538033, 1.953776081688828, 0.0],
    ),
    ((2, 3, 2), "float64"): (
        [
            [
                [-1.0048096436934069, 0.64350216766785],
                [0.786303797363501, 0.8428843489966626],
                [0.2270858077044303, 0.36299366993613513],
            ],
            [
                [-1.2043401902201103, -0.6623215895985274],
                [-0.16527457208027568, 0.5853917440227657],
                [0.2565895333854155, -0.8375279548346499],
            ],
        ],
        [[1.197718375855557, 1.7671522378688653], [1.8295685993793023, 1.1754658587030171]],
    ),
    ((4, 3), "float32"): (
        [
            [-1.2389212846755981, -0.039978981018066406, 0.018381834030151367],
            [-0.4578400254249573, -0.9217061996459961, -0.8839018940925598],
            [0.6949703097343445, -0.14451368153095245, 1.0946656465530396],
            [-0.17608760297298431, 0.45506420731544495, -0.31368914246559143],
        ],
        [1.1603566408157349, 1.6287074089050293, 1.820828914642334],
    ),
    ((3, 4), "complex128"): (
        (
            [
                [-1.4334505903231594, 0.4420884823832467, -0.5911270294584349, 0.39699688834046054],
                [
                    0.0001724145059776356,
                    1.6030772829406932,
                    -0.3567124904683461,
                    -0.5955098725800687,
                ],
                [-0.3988181766450321, 0.26451097683690933, -0.8248863473124743, 0.9998517206755173],
            ],
            [
                [0.0, 0.6838837425330632, -0.006994018300101601, -1.2601569092839782],
                [-0.31109505325519665, 0.0, -1.3119877545053433, -0.2266694880500298],
                [-0.3267490841872719, -0.3539177653251653, 0.0, 0.43868836078003093],
            ],
        ),
        (
            [1.138595171773778, 1.3512747192736014, 1.5222601359273213],
            [0.6122168198992678, -0.6596823006616, 0.8527862278561819],
        ),
    ),
}


def _tol(dtype: str) -> float:
    return 2e-6 if dtype in ("float32", "complex64") else 1e-13


@pytest.mark.parametrize("shape,dtype", list(GEQRF), ids=[f"{s}-{d}" for s, d in GEQRF])
def test_geqrf_is_pytorchs_compact_form(conn, shape, dtype):
    want_a, want_tau = (_value(v) for v in GEQRF[(shape, dtype)])
    a, tau = gt.geqrf(gt.tensor(_input(shape, dtype)))
    assert a.dtype == dtype and tau.dtype == dtype
    assert a.shape == shape and tau.shape == (*shape[:-2], min(shape[-2:]))
    np.testing.assert_allclose(a.numpy(), want_a, rtol=0, atol=_tol(dtype))
    np.testing.assert_allclose(tau.numpy(), want_tau, rtol=0, atol=_tol(dtype))


def test_geqrf_method_named_fields_and_empty_matrices(conn):
    x = gt.tensor(_input((4, 3), "float64"))
    r = x.geqrf()
    assert type(r).__name__ == "geqrf" and r._fields == ("a", "tau")
    np.testing.assert_array_equal(r.a.numpy(), gt.geqrf(x).a.numpy())
    for shape, tau_shape in (((0, 3), (0,)), ((2, 0, 3), (2, 0)), ((3, 0), (0,))):
        a, tau = gt.geqrf(gt.zeros(*shape))
        assert a.shape == shape and tau.shape == tau_shape
    a, tau = gt.geqrf(gt.zeros(3, 3))  # (tau 0: every reflector is the identity)
    assert not a.numpy().any() and not tau.numpy().any()


def test_geqrf_reflectors_rebuild_the_matrix(conn):
    x = _input((2, 5, 3), "complex128")
    a, tau = gt.geqrf(gt.tensor(x))
    r = np.triu(a.numpy()[..., :3, :])
    q = gt.orgqr(a, tau).numpy()
    np.testing.assert_allclose(q @ r, x, atol=1e-13)


def test_geqrf_is_not_differentiable_as_in_pytorch(conn):
    x = gt.tensor(_input((4, 3), "float64"), requires_grad=True)
    a, tau = gt.geqrf(x)
    assert a.grad_fn.name() == "GeqrfBackward0" and tau.grad_fn.name() == "GeqrfBackward0"
    with pytest.raises(NotImplementedError, match="the derivative for 'geqrf' is not implemented"):
        (a.sum() + tau.sum()).backward()


def test_geqrf_errors_are_pytorchs(conn):
    with pytest.raises(RuntimeError, match="torch.geqrf: input must have at least 2 dimensions"):
        gt.geqrf(gt.ones(3))
    with pytest.raises(NotImplementedError, match="\"geqrf_cpu\" not implemented for 'Long'"):
        gt.geqrf(gt.ones(3, 3, dtype="int64"))
    with pytest.raises(NotImplementedError, match="for 'Half'"):
        gt.geqrf(gt.ones(3, 3, dtype="float16"))


# torch.ormqr(a, tau, c, left, transpose) with (a, tau) = GEQRF[((4, 3), "float64")] and c:
# _input((4, 2))[::-1] (left) or _input((2, 4))[:, ::-1] (right).
ORMQR = {
    (True, False): [
        [-0.16805550275186118, -0.28919507385266935],
        [-0.31504106776593455, 0.6956921360685345],
        [-1.312156934655749, 0.38256598236787664],
        [0.39819533311064204, 0.6870173145052014],
    ],
    (True, True): [
        [-0.7375366930503295, 0.3304908968382817],
        [-1.1069336050738947, -0.23082720441798568],
        [-0.321404777961571, 0.9768262548064918],
        [-0.3677573383720792, 0.26320314768561864],
    ],
    (False, False): [
        [0.1417996422125896, -0.12865518276905136, -1.207738723950528, 0.5179298557957482],
        [0.985574858970776, -0.5294172017295505, -0.34314110492724564, -0.24667809313257083],
    ],
    (False, True): [
        [-0.4589606795518798, -1.167987764255231, 0.028161341406661454, -0.4334859530189324],
        [-1.0654942190420016, 0.17904842043734084, -0.10467662978221888, -0.50193905122936],
    ],
}


@pytest.mark.parametrize("left,transpose", list(ORMQR))
def test_ormqr_is_pytorchs(conn, left, transpose):
    a, tau = (gt.tensor(_value(v)) for v in GEQRF[((4, 3), "float64")])
    c = _input((4, 2), "float64")[::-1] if left else _input((2, 4), "float64")[:, ::-1]
    got = gt.ormqr(a, tau, gt.tensor(c.copy()), left=left, transpose=transpose)
    np.testing.assert_allclose(got.numpy(), np.asarray(ORMQR[(left, transpose)]), atol=1e-14)
    same = a.ormqr(tau, gt.tensor(c.copy()), left, transpose)
    np.testing.assert_array_equal(same.numpy(), got.numpy())


def test_ormqr_of_geqrf_is_q_times_other_batched_complex(conn):
    x = _input((2, 5, 3), "complex64")
    a, tau = gt.geqrf(gt.tensor(x))
    q = np.linalg.qr(x.astype("complex128"), mode="complete")[0]
    # (Q's sign convention is LAPACK's in both: geqrf and numpy's qr)
    c = _input((2, 5, 4), "complex64")
    got = gt.ormqr(a, tau, gt.tensor(c), transpose=True)
    assert got.dtype == "complex64" and got.shape == (2, 5, 4)
    np.testing.assert_allclose(got.numpy(), q.conj().swapaxes(-1, -2) @ c, atol=1e-5)


# PyTorch's gradients of sum(real(out) * arange(12).reshape(4, 3) + imag(out)), out =
# torch.ormqr(a, tau, c, left=True, transpose=True), (a, tau) = torch.geqrf(_input((3, 4, 2),
# "complex128")[0]), c = _input((4, 3), "complex128"): (grad a, grad tau, grad c).
GRADS = (
    (
        [
            [0.0, 0.0],
            [9.299648715619204, 0.0],
            [-6.297276363431475, 28.392579459003763],
            [-33.83920941429711, 27.22516458234798],
        ],
        [
            [0.0, 0.0],
            [32.46864106952427, 0.0],
            [7.383929307267838, 13.446375114869905],
            [13.14743758901034, 7.543594431437109],
        ],
    ),
    ([-15.63057494804018, 12.252702856273022], [-3.954659052118423, -15.456977149657481]),
    (
        [
            [-2.1101637457101847, -2.333288312691006, -2.5564128796718277],
            [1.2056551411746452, 0.5446972226504989, -0.1162606958736475],
            [1.1402413432837293, 1.2936868433245454, 1.4471323433653605],
            [4.64160563415101, 4.868624934638895, 5.095644235126779],
        ],
        [
            [-3.0694973888425645, -3.471393876198989, -3.873290363555415],
            [-9.439607493846587, -10.947690463432286, -12.455773433017988],
            [0.7975573895537287, 1.4221000639520522, 2.0466427383503754],
            [1.4439009021764206, 2.226446869787651, 3.00899283739888],
        ],
    ),
)


def test_ormqr_gradients_are_pytorchs(conn):
    a0, tau0 = gt.geqrf(gt.tensor(_input((3, 4, 2), "complex128")[0]))
    a = gt.tensor(a0.numpy(), requires_grad=True)
    tau = gt.tensor(tau0.numpy(), requires_grad=True)
    c = gt.tensor(_input((4, 3), "complex128"), requires_grad=True)
    out = gt.ormqr(a, tau, c, left=True, transpose=True)
    assert out.grad_fn.name() == "OrmqrBackward0"
    (out.real * gt.arange(12.0).reshape(4, 3) + out.imag).sum().backward()
    for got, want in zip((a.grad, tau.grad, c.grad), GRADS):
        np.testing.assert_allclose(got.numpy(), _value(want), atol=1e-12)


def test_householder_product_node_is_pytorchs(conn):
    a, tau = (gt.tensor(_value(v)) for v in GEQRF[((4, 3), "float64")])
    a.requires_grad_()
    assert gt.orgqr(a, tau).grad_fn.name() == "LinalgHouseholderProductBackward0"
    assert gt.linalg.householder_product(a, tau).grad_fn.name() == (
        "LinalgHouseholderProductBackward0"
    )


@pytest.mark.parametrize(
    "shapes,kw,match",
    [
        (((3,), (3,), (3, 2)), {}, "input must have at least 2 dimensions"),
        (((3, 2), (2,), (3,)), {}, "other must have at least 2 dimensions"),
        (((3, 2), (1, 2), (3, 2)), {}, "Expected tau to have one dimension less than input"),
        (((4, 2), (3,), (4, 2)), {}, "tau.shape\\[-1\\] must be equal to min\\(other.shape"),
        (((4, 2), (2,), (5, 2)), {}, "other.shape\\[-2\\] must be equal to input.shape\\[-2\\]"),
        (((4, 2), (2,), (3, 5)), {"left": False}, "other.shape\\[-1\\] must be equal"),
        (((2, 4, 2), (2, 2), (4, 2)), {}, "same number of dimensions as input"),
        (((2, 4, 2), (3, 2), (2, 4, 2)), {}, "batch dimensions of tau .* but got \\[3\\]"),
        (((2, 4, 2), (2, 2), (3, 4, 2)), {}, "batch dimensions of other .* but got \\[3\\]"),
    ],
)
def test_ormqr_errors_are_pytorchs(conn, shapes, kw, match):
    args = [gt.ones(*s) for s in shapes]
    with pytest.raises(RuntimeError, match="torch.ormqr: .*" + match):
        gt.ormqr(*args, **kw)


def test_ormqr_dtype_errors_are_pytorchs(conn):
    a, c = gt.ones(4, 2), gt.ones(4, 2)
    with pytest.raises(RuntimeError, match="input has dtypeFloat and tau has dtype Double"):
        gt.ormqr(a, gt.ones(2, dtype="float64"), c)
    with pytest.raises(RuntimeError, match="input has dtypeFloat and other has dtype Double"):
        gt.ormqr(a, gt.ones(2), gt.ones(4, 2, dtype="float64"))
    with pytest.raises(NotImplementedError, match="\"ormqr_cpu\" not implemented for 'Long'"):
        i = gt.ones(4, 2, dtype="int64")
        gt.ormqr(i, gt.ones(2, dtype="int64"), i)
