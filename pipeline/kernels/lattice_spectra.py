"""Spectra of periodic lattices: Bloch/Fourier block diagonalisation, clique-insertion maps,
dense and sparse paths for finite graphs (seed 004, Zhang thesis, ch. 6).

Fourier path. On the L1 x L2 torus the adjacency matrix commutes with the translations, so it
splits into L1*L2 blocks of size c (cells per vertex), one per wave vector
theta = 2 pi (j1 / L1, j2 / L2):  A(theta)_{uv} = sum over cell edges (u, v, d) of e^{i theta.d}
(+ the conjugate for the reverse direction). The spectrum of the torus is the union of the
block spectra, which costs O(N c^2) instead of O(N^3). This is how the thesis writes the
spectrum of H^t(n, m) (§6.2.1, after [Yan and Zhang, 2009]).

Clique-insertion maps (r-regular G, n vertices, m = rn/2 edges):

- adjacency, Lemma 6.2.2: each eigenvalue lambda of G gives (r - 2 +- sqrt(r^2 + 4(lambda + 1)))/2,
  plus -2 and 0 each with multiplicity m - n;
- energy, Corollary 6.2.3 *corrected*: E(C(G)) = sum_i sqrt(r^2 + 4(lambda_i + 1)) + (r - 2) n
  (the thesis prints "+ n", right only for r = 3; see /work/shared/ERRATA.md);
- Laplacian (mu = r - lambda): each mu gives (r + 2 +- sqrt((r + 2)^2 - 4 mu))/2, plus r + 2 and r
  each with multiplicity n(r - 2)/2 (§6.4 for mu_2). The "-" branch is evaluated as
  2 mu / (r + 2 + sqrt(...)) to avoid cancellation for small mu.

The matrix-tree theorem gives ln tau = sum of ln of the nonzero Laplacian eigenvalues - ln N.
"""

from __future__ import annotations

import math

import numpy as np

from pipeline.kernels.graphs import Graph
from pipeline.kernels.lattices import PeriodicCell

_CHUNK = 1 << 17  # wave vectors per batch: bounds peak memory of the Fourier path


# --------------------------------------------------------------------------- Bloch matrices
def bloch_matrices(cell: PeriodicCell, theta1: np.ndarray, theta2: np.ndarray,
                   laplacian: bool = False) -> np.ndarray:
    """Bloch matrices (K, c, c) of the adjacency (or Laplacian) at wave vectors (theta1, theta2).

    A(theta)_{uv} = sum_{(u, v, d1, d2)} e^{i (theta1 d1 + theta2 d2)} and its Hermitian mirror;
    the Laplacian block is diag(degrees) - A(theta).
    """
    theta1 = np.asarray(theta1, dtype=np.float64).ravel()
    theta2 = np.asarray(theta2, dtype=np.float64).ravel()
    c = cell.size
    h = np.zeros((theta1.size, c, c), dtype=np.complex128)
    for u, v, d1, d2 in cell.edges.tolist():
        phase = np.exp(1j * (theta1 * d1 + theta2 * d2))
        h[:, u, v] += phase
        h[:, v, u] += np.conj(phase)
    if laplacian:
        h = -h
        idx = np.arange(c)
        h[:, idx, idx] += cell.degrees
    return h


def _block_eigenvalues(h: np.ndarray) -> np.ndarray:
    if h.shape[1] == 1:
        return h[:, 0, 0].real.reshape(-1, 1)
    return np.linalg.eigvalsh(h)


def torus_wave_vectors(L1: int, L2: int) -> tuple[np.ndarray, np.ndarray]:
    """The L1*L2 wave vectors 2 pi (j1/L1, j2/L2), j1 major; index 0 is theta = 0."""
    j1, j2 = np.meshgrid(np.arange(L1), np.arange(L2), indexing="ij")
    return 2 * np.pi * j1.ravel() / L1, 2 * np.pi * j2.ravel() / L2


def torus_eigenvalues(cell: PeriodicCell, L1: int, L2: int, laplacian: bool = False) -> np.ndarray:
    """All N = c L1 L2 eigenvalues of the torus by the Fourier path, wave vector by wave vector.

    For the Laplacian the zero mode (theta = 0, lowest band) is set to exactly 0 and placed at
    index 0, so ``mu[1:]`` are the nonzero eigenvalues of the connected torus.
    """
    t1, t2 = torus_wave_vectors(L1, L2)
    out = np.empty((t1.size, cell.size))
    for a in range(0, t1.size, _CHUNK):
        b = min(a + _CHUNK, t1.size)
        out[a:b] = _block_eigenvalues(bloch_matrices(cell, t1[a:b], t2[a:b], laplacian))
    flat = out.ravel()
    if laplacian:
        flat[0] = 0.0  # theta = 0, lowest band: the constant vector
    return flat


def cylinder_eigenvalues(cell: PeriodicCell, L1: int, L2: int, laplacian: bool = False) -> np.ndarray:
    """All eigenvalues of the cylinder (direction 1 periodic, direction 2 open) by Fourier
    transforming direction 1 only: L1 Hermitian blocks of size L2*c, one per
    theta1 = 2 pi j1 / L1, each the open chain of L2 cells with phases e^{i theta1 d1}.
    Cost O(L1 (L2 c)^3) instead of O((L1 L2 c)^3). Degrees are those of the cylinder (the cut
    seam edges are absent). For the Laplacian the zero mode (theta1 = 0, lowest) is set to 0 and
    placed at index 0.
    """
    c = cell.size
    n2 = L2 * c
    if L1 < 3:
        raise ValueError("the periodic direction needs L1 >= 3 for the 1-D Fourier path")
    j2 = np.arange(L2)
    kinds = []  # per cell edge: (rows, cols, d1); rows/cols distinct within one kind
    degree = np.zeros(n2)
    for u, v, d1, d2 in cell.edges.tolist():
        t = j2 + d2
        keep = (t >= 0) & (t < L2)
        rows, cols = j2[keep] * c + u, t[keep] * c + v
        kinds.append((rows, cols, d1))
        np.add.at(degree, rows, 1.0)
        np.add.at(degree, cols, 1.0)
    out = np.empty((L1, n2))
    half = L1 // 2 + 1  # block -theta1 is the conjugate of block theta1: same eigenvalues
    per_batch = max(1, (1 << 22) // (n2 * n2))  # about 64 MB of complex blocks per batch
    for a in range(0, half, per_batch):
        theta1 = 2 * np.pi * np.arange(a, min(a + per_batch, half)) / L1
        h = np.zeros((theta1.size, n2, n2), dtype=np.complex128)
        for rows, cols, d1 in kinds:
            phase = np.exp(1j * theta1 * d1)[:, None]
            h[:, rows, cols] += phase
            h[:, cols, rows] += np.conj(phase)
        if laplacian:
            h = -h
            idx = np.arange(n2)
            h[:, idx, idx] += degree
        out[a:a + theta1.size] = np.linalg.eigvalsh(h)
    mirror = np.arange(half, L1)
    out[mirror] = out[L1 - mirror]
    flat = out.ravel()
    if laplacian:
        flat[0] = 0.0
    return flat


def cylinder_summary(cell: PeriodicCell, L1: int, L2: int) -> dict:
    """Energy, ln tau, Kirchhoff index, mu_2 of the cylinder by the 1-D Fourier path."""
    energy = float(np.sum(np.abs(cylinder_eigenvalues(cell, L1, L2))))
    out = laplacian_summary(cylinder_eigenvalues(cell, L1, L2, laplacian=True))
    out["energy"] = energy
    out["n_vertices"] = L1 * L2 * cell.size
    return out


# --------------------------------------------------------------------------- clique maps
def clique_adjacency_spectrum(eigenvalues: np.ndarray, r: int) -> np.ndarray:
    """Adjacency spectrum of C(G) from that of an r-regular G (Lemma 6.2.2)."""
    lam = np.asarray(eigenvalues, dtype=np.float64)
    n = lam.size
    root = np.sqrt(np.maximum(r * r + 4.0 * (lam + 1.0), 0.0))
    extra = n * (r - 2) // 2  # m - n
    return np.concatenate([(r - 2 + root) / 2, (r - 2 - root) / 2,
                           np.full(extra, -2.0), np.zeros(extra)])


def clique_laplacian_spectrum(mu: np.ndarray, r: int) -> np.ndarray:
    """Laplacian spectrum of C(G) from that of an r-regular G (Laplacian form of Lemma 6.2.2).

    Order is kept: entry 0 of the result is the image of entry 0 of ``mu`` under the "-"
    branch, so a zero mode at index 0 stays at index 0 (and stays exactly 0).
    """
    mu = np.asarray(mu, dtype=np.float64)
    n = mu.size
    root = np.sqrt(np.maximum((r + 2.0) ** 2 - 4.0 * mu, 0.0))
    minus = 2.0 * mu / (r + 2.0 + root)  # = (r + 2 - root)/2 without cancellation
    plus = (r + 2.0 + root) / 2.0
    extra = n * (r - 2) // 2
    return np.concatenate([minus, plus, np.full(extra, r + 2.0), np.full(extra, float(r))])


def clique_energy(eigenvalues: np.ndarray, r: int) -> float:
    """E(C(G)) = sum_i sqrt(r^2 + 4(lambda_i + 1)) + (r - 2) n  (Corollary 6.2.3, corrected)."""
    lam = np.asarray(eigenvalues, dtype=np.float64)
    return float(np.sum(np.sqrt(r * r + 4.0 * (lam + 1.0))) + (r - 2) * lam.size)


def clique_log_tree_count(log_tau: float, n: int, r: int, k: int) -> float:
    """ln tau(C^k(G)) = (ns - k) ln r + (ns + k) ln(r + 2) + ln tau(G),
    s = (r/2 - 1)(r^k - 1)/(r - 1)  (Lemma 6.3.1, [Yan et al., 2008])."""
    ns = n * (r - 2) * (r ** k - 1) // (2 * (r - 1))  # n * s_k(r), an integer
    return (ns - k) * math.log(r) + (ns + k) * math.log(r + 2) + log_tau


def clique_tree_count(tau: int, n: int, r: int, k: int) -> int:
    """tau(C^k(G)) = r^(ns - k) (r + 2)^(ns + k) tau(G) in exact integers (Lemma 6.3.1)."""
    ns = n * (r - 2) * (r ** k - 1) // (2 * (r - 1))
    return r ** (ns - k) * (r + 2) ** (ns + k) * int(tau)


# --------------------------------------------------------------------------- summaries
def laplacian_summary(mu: np.ndarray) -> dict:
    """ln tau, Kirchhoff index and algebraic connectivity from a Laplacian spectrum whose
    zero mode is entry 0 (a connected graph).

    ln tau = sum_{i>=1} ln mu_i - ln N (matrix-tree); Kf = N sum_{i>=1} 1/mu_i; a(G) = min mu_i.
    """
    mu = np.asarray(mu, dtype=np.float64)
    n = mu.size
    nonzero = mu[1:]
    if n == 1:
        return {"log_spanning_trees": 0.0, "kirchhoff_index": 0.0,
                "algebraic_connectivity": math.nan}
    smallest = float(nonzero.min())
    if smallest <= 1e-12 * max(1.0, float(mu.max())):
        return {"log_spanning_trees": -math.inf, "kirchhoff_index": math.inf,
                "algebraic_connectivity": 0.0}
    return {"log_spanning_trees": float(np.sum(np.log(nonzero)) - math.log(n)),
            "kirchhoff_index": float(n * np.sum(1.0 / nonzero)),
            "algebraic_connectivity": smallest}


def torus_summary(cell: PeriodicCell, L1: int, L2: int, base_cell: PeriodicCell | None = None,
                  insertions: int = 0) -> dict:
    """Energy, ln tau, Kirchhoff index, algebraic connectivity of the torus, by Fourier.

    With ``base_cell`` and ``insertions`` = k >= 1 the Fourier path runs on the (r^k times
    smaller) base cell and the Laplacian spectrum is carried through C by the spectral map;
    the energy of C^k uses the corrected Corollary 6.2.3 on the spectrum of C^{k-1}.
    Without them the Bloch matrices of ``cell`` itself are diagonalised.
    """
    if base_cell is None or insertions == 0:
        mu = torus_eigenvalues(cell, L1, L2, laplacian=True)
        r = cell.degree
        energy = float(np.sum(np.abs(r - mu)))
    else:
        r = base_cell.degree
        mu = torus_eigenvalues(base_cell, L1, L2, laplacian=True)
        for _ in range(insertions - 1):
            mu = clique_laplacian_spectrum(mu, r)
        energy = clique_energy(r - mu, r)
        mu = clique_laplacian_spectrum(mu, r)
    out = laplacian_summary(mu)
    out["energy"] = energy
    out["n_vertices"] = int(mu.size)
    return out


def dense_summary(graph: Graph) -> dict:
    """All quantities from dense eigenvalues (numpy eigvalsh): O(N^3), small N only."""
    a = graph.adjacency().toarray()
    energy = float(np.sum(np.abs(np.linalg.eigvalsh(a))))
    lap = np.diag(a.sum(axis=1)) - a
    mu = np.linalg.eigvalsh(lap)
    mu[0] = 0.0  # the zero mode (smallest) of a connected graph
    out = laplacian_summary(mu)
    out["energy"] = energy
    out["n_vertices"] = graph.n
    return out


def sparse_log_tree_count(graph: Graph) -> float:
    """ln tau by sparse LU of the reduced Laplacian (last row and column removed):
    ln det = sum ln |U_ii| (SuperLU, COLAMD ordering; the matrix is SPD so det > 0)."""
    from scipy.sparse.linalg import splu

    lap = graph.laplacian().tocsc()
    reduced = lap[:-1, :-1].tocsc()
    lu = splu(reduced, permc_spec="COLAMD", diag_pivot_thresh=0.0,
              options={"SymmetricMode": True})
    return float(np.sum(np.log(np.abs(lu.U.diagonal()))))


def sparse_algebraic_connectivity(graph: Graph) -> float:
    """mu_2 by shift-invert Lanczos (scipy eigsh) at a small negative shift."""
    from scipy.sparse.linalg import eigsh

    lap = graph.laplacian().tocsc()
    # A fixed start vector: ARPACK's own is random, drawn afresh at each call, and mu_2 came
    # out 1-4 ulps apart from call to call (a resumed sweep's rows differed from a clean
    # run's). Positive, so not orthogonal to the constant vector, nor generically to mu_2's.
    start = np.random.default_rng(0).uniform(0.5, 1.5, lap.shape[0])
    vals = eigsh(lap, k=2, sigma=-1e-3, which="LM", return_eigenvectors=False, tol=1e-12,
                 v0=start)
    return float(np.sort(vals)[1])


def dense_log_tree_count(graph: Graph) -> float:
    """ln tau by numpy slogdet of the reduced Laplacian (the dense baseline)."""
    lap = graph.laplacian().toarray()
    sign, logdet = np.linalg.slogdet(lap[:-1, :-1])
    return float(logdet) if sign > 0 else -math.inf


# --------------------------------------------------------------------------- infinite-lattice limits
def _mean_abs_cos(a: float, b: float) -> float:
    """(1/2pi) int_0^{2pi} |a + b cos t| dt for b >= 0, in closed form."""
    if b <= abs(a):
        return abs(a)
    t0 = math.acos(-a / b)  # a + b cos t >= 0 on [0, t0]
    return (a * (2.0 * t0 - math.pi) + 2.0 * b * math.sin(t0)) / math.pi


def _mean_sqrt_cos(a: float, b: float) -> float:
    """(1/2pi) int_0^{2pi} sqrt(a + b cos t) dt for a >= b >= 0: (2/pi) sqrt(a+b) E(2b/(a+b))."""
    from scipy.special import ellipe

    if a + b <= 0:
        return 0.0
    return 2.0 / math.pi * math.sqrt(a + b) * float(ellipe(min(1.0, 2.0 * b / (a + b))))


def _mean_log_cos(a: float, b: float) -> float:
    """(1/2pi) int_0^{2pi} ln(a - b cos t) dt = ln((a + sqrt(a^2 - b^2))/2) for a >= |b|."""
    return math.log((a + math.sqrt(max(a * a - b * b, 0.0))) / 2.0)


def _half_period_mean(f, points=()) -> float:
    """(1/pi) int_0^pi f(x) dx by adaptive Gauss-Kronrod (scipy quad), split at kinks."""
    import warnings

    from scipy.integrate import IntegrationWarning, quad

    edges = [0.0, *sorted(points), math.pi]
    total = 0.0
    for lo, hi in zip(edges[:-1], edges[1:]):
        with warnings.catch_warnings():  # quad warns when it hits double-precision roundoff
            warnings.simplefilter("ignore", IntegrationWarning)
            val, _ = quad(f, lo, hi, epsabs=1e-15, epsrel=1e-14, limit=400)
        total += val
    return total / math.pi


def base_energy_limit(base: str) -> float:
    """Energy per vertex of the infinite hexagonal, square or triangular lattice,
    (1/c)(1/4pi^2) int int sum_bands |lambda(theta)| d theta, with the y-integral in closed form
    (the Bloch symbols of :mod:`pipeline.kernels.lattices` are a + b cos(y + phi) in y)."""
    if base == "square":  # lambda = 2 cos x + 2 cos y; exact value 16/pi^2
        return _half_period_mean(lambda x: _mean_abs_cos(2 * math.cos(x), 2.0))
    if base == "triangular":  # lambda = 2 cos x + 4|cos(x/2)| cos(y + phi)
        kink = 2 * math.acos((math.sqrt(3) - 1) / 2)  # |a| = b
        return _half_period_mean(
            lambda x: _mean_abs_cos(2 * math.cos(x), 4 * abs(math.cos(x / 2))), [kink])
    if base == "hexagonal":  # bands +-|f|, |f|^2 = 3 + 2 cos x + 4|cos(x/2)| cos(y + phi)
        return _half_period_mean(
            lambda x: _mean_sqrt_cos(3 + 2 * math.cos(x), 4 * abs(math.cos(x / 2))),
            [2 * math.pi / 3])  # the Dirac point
    raise ValueError(base)


def base_tree_entropy_limit(base: str) -> float:
    """Spanning-tree entropy z = lim ln tau / N of the base lattice,
    (1/c)(1/4pi^2) int int ln det L(theta) d theta, with the y-integral in closed form.
    Square: 4G/pi (Catalan's G). Hexagonal: det L(theta) = 9 - |f|^2 = the triangular symbol,
    so z_hex = z_tri / 2 (per vertex; two vertices per cell)."""
    if base == "square":
        return _half_period_mean(lambda x: _mean_log_cos(4 - 2 * math.cos(x), 2.0))
    tri = _half_period_mean(
        lambda x: _mean_log_cos(6 - 2 * math.cos(x), 4 * abs(math.cos(x / 2))))
    if base == "triangular":
        return tri
    if base == "hexagonal":
        return tri / 2
    raise ValueError(base)


def log_det_mean_over_y(cell: PeriodicCell, x: float) -> float:
    """(1/2pi) int_0^{2pi} ln det L(x, y) dy by Jensen's formula.

    det L(x, e^{iy}) is a Laurent polynomial sum_{k=-c}^{c} a_k w^k in w = e^{iy} (each Bloch
    entry has offsets d2 in {-1, 0, 1}); its coefficients come from an FFT of 2c + 2 samples, and
    the mean of ln|P| over the unit circle is ln|a_top| + sum over roots of ln max(1, |w_j|)
    (the Mahler measure). Exact up to rounding, no quadrature in y.
    """
    c = cell.size
    span = int(np.max(np.abs(cell.edges[:, 3]))) * c
    samples = 2 * span + 2
    y = 2 * np.pi * np.arange(samples) / samples
    dets = np.linalg.det(bloch_matrices(cell, np.full(samples, x), y, laplacian=True))
    coef = np.fft.fft(dets) / samples  # coef[k] multiplies e^{-iky}: index k <-> w^{-k}
    laurent = np.array([coef[(-k) % samples] for k in range(-span, span + 1)])  # w^-span..w^span
    poly = laurent[::-1]  # highest power first, for numpy.roots
    scale = np.max(np.abs(poly))
    while abs(poly[0]) <= 1e-13 * scale:
        poly = poly[1:]
    roots = np.roots(poly)
    return float(np.log(abs(poly[0])) + np.sum(np.log(np.maximum(1.0, np.abs(roots)))))


def tree_entropy_limit_bz(cell: PeriodicCell) -> float:
    """z = (1/c)(1/4pi^2) int int ln det L(theta) d theta over the Brillouin zone, directly for
    any cell: y by Jensen's formula (:func:`log_det_mean_over_y`), x by adaptive quadrature.
    det L(-theta) = conj det L(theta), so x runs over [0, pi]; the only singularity (theta = 0,
    the zero mode) sits at the endpoint x = 0."""
    return _half_period_mean(lambda x: log_det_mean_over_y(cell, x)) / cell.size


def clique_energy_limit(base: PeriodicCell, insertions: int, tol: float = 1e-13,
                        start: int = 32, max_grid: int = 4096) -> tuple[float, int]:
    """Energy per vertex of the infinite C^k(H), k = ``insertions`` >= 1, H = ``base`` r-regular:
    [ <sum_bands sqrt((r+2)^2 - 4 mu_b(theta))> + (r - 2) c' ] / (r c')  (corrected Cor. 6.2.3),
    where mu_b are the Bloch Laplacian bands of C^{k-1}(H) (c' of them), obtained from the
    bands of H by the Laplacian map k - 1 times.

    The integrand is the trace of an analytic function of the Bloch Laplacian (its branch point
    mu = (r+2)^2/4 lies above the spectrum, which is in [0, 2r]), so it is real-analytic and
    periodic in theta and the M x M periodic trapezoid rule converges exponentially. M doubles
    until two successive values agree to ``tol``. Returns (value, M).
    """
    if insertions < 1:
        raise ValueError("insertions must be >= 1")
    r = base.degree
    prev = None
    m = start
    while m <= max_grid:
        mu = torus_eigenvalues(base, m, m, laplacian=True)
        for _ in range(insertions - 1):
            mu = clique_laplacian_spectrum(mu, r)
        value = (np.mean(np.sqrt((r + 2.0) ** 2 - 4.0 * mu)) + (r - 2)) / r
        if prev is not None and abs(value - prev) <= tol * max(1.0, abs(value)):
            return float(value), m
        prev, m = value, 2 * m
    raise RuntimeError("energy limit did not converge")


BZ_DIRECT_MAX_CELL = 64  # Jensen's formula needs roots of a degree-2c polynomial


def lattice_limits(base: str, insertions: int) -> dict:
    """Energy per vertex and spanning-tree entropy of the infinite C^k(base) lattice.

    k = 0: one closed-form y-integral, then adaptive quadrature in x (kinks split out).
    k >= 1: energy by the exponentially convergent trapezoid rule on the Bloch spectrum of
    C^{k-1}(base) (see :func:`clique_energy_limit`).
    Tree entropy: directly over the Brillouin zone of C^k(base) (:func:`tree_entropy_limit_bz`,
    cells of at most ``BZ_DIRECT_MAX_CELL`` vertices), and independently by Proposition 6.3.2
    from the base value (the reported value when the cell is too large for the direct path),
    z_{C^k(H)} = r^{-k} (z_H + s_k ln(r (r + 2))), s_k = (r/2 - 1)(r^k - 1)/(r - 1).
    """
    from pipeline.kernels.lattices import base_cell, lattice_cell

    r = base_cell(base).degree
    z0 = base_tree_entropy_limit(base)
    s = (r / 2 - 1) * (r ** insertions - 1) / (r - 1)
    z = (z0 + s * math.log(r * (r + 2))) / r ** insertions
    cell = lattice_cell(base, insertions)
    z_bz = tree_entropy_limit_bz(cell) if cell.size <= BZ_DIRECT_MAX_CELL else None
    if insertions == 0:
        energy, grid = base_energy_limit(base), 0
    else:
        energy, grid = clique_energy_limit(base_cell(base), insertions)
    return {"energy_per_vertex_limit": energy,
            "spanning_tree_entropy_limit": z if z_bz is None else z_bz,
            "spanning_tree_entropy_bz": z_bz, "spanning_tree_entropy_prop632": z,
            "grid": grid, "cell_size": cell.size, "degree": r}
