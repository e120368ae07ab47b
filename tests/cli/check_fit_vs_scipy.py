#!/usr/bin/python3
"""Acceptance of `gradscope fit` against scipy (run by ctest as cli.fit_vs_scipy).

usage: check_fit_vs_scipy.py GRADSCOPE OUTDIR

Draws signed samples whose magnitudes follow each SID (Laplace, double gamma, double generalized
Pareto), writes them as float32 .npy under OUTDIR, runs `gradscope fit x.npy --json` and asserts:
  - exponential beta and gamma (alpha, beta) within 1e-4 relative of scipy's fit with floc=0;
  - the generalized-Pareto log-likelihood no lower than scipy's genpareto.fit(floc=0) reaches
    (tolerance 1e-9 relative);
  - KS D of every fitted law within 1e-6 of scipy.stats.kstest against the same law;
  - n and excluded (zeros and non-finite planted on purpose) as written.
Exits 77 (ctest: skipped) when numpy or scipy is missing.
"""
import json
import os
import subprocess
import sys

try:
    import numpy as np
    from scipy import stats
except ImportError as e:  # pragma: no cover
    print(f"skipped: {e} (install python3-scipy)")
    sys.exit(77)


def main():
    gradscope, outdir = sys.argv[1], sys.argv[2]
    os.makedirs(outdir, exist_ok=True)
    rng = np.random.default_rng(424242)
    n = 20000
    magnitudes = {
        "laplace": rng.exponential(0.01, n),
        "gamma": rng.gamma(0.45, 0.02, n),
        "gpareto": stats.genpareto(0.2, scale=0.01).rvs(n, random_state=rng),
    }
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    for name, m in magnitudes.items():
        g = (m * rng.choice([-1.0, 1.0], n)).astype(np.float32)
        g[5] = 0.0
        g[17] = np.nan
        g[23] = np.inf
        path = os.path.join(outdir, f"{name}.npy")
        np.save(path, g)
        out = subprocess.run([gradscope, "fit", path, "--json"], capture_output=True, text=True)
        if out.returncode != 0:
            check(False, f"{name}: gradscope fit failed: {out.stderr.strip()}")
            continue
        rep = json.loads(out.stdout)
        x = np.abs(g.astype(np.float64))
        x = np.sort(x[np.isfinite(x) & (x > 0)])
        check(rep["n"] == n and rep["excluded"] == 3, f"{name}: n={rep['n']} excluded={rep['excluded']}")
        fits = {f["dist"]: f for f in rep["fits"]}
        beta = stats.expon.fit(x, floc=0)[1]
        ours = fits["exponential"]["params"]["beta"]
        check(abs(ours / beta - 1) <= 1e-4, f"{name}: exponential beta {ours} vs scipy {beta}")
        a, _, b = stats.gamma.fit(x, floc=0)
        pa, pb = fits["gamma"]["params"]["alpha"], fits["gamma"]["params"]["beta"]
        check(
            abs(pa / a - 1) <= 1e-4 and abs(pb / b - 1) <= 1e-4, f"{name}: gamma alpha,beta {pa},{pb} vs scipy {a},{b}"
        )
        c, _, s = stats.genpareto.fit(x, floc=0)
        scipy_ll = np.sum(stats.genpareto.logpdf(x, c, 0, s))
        ll = fits["gpareto"]["loglik"]
        check(
            ll >= scipy_ll - 1e-9 * abs(scipy_ll),
            f"{name}: gpareto loglik {ll!r} >= scipy {scipy_ll!r} (xi {fits['gpareto']['params']['xi']} vs {c})",
        )
        laws = {
            "exponential": stats.expon(0, ours),
            "gamma": stats.gamma(pa, 0, pb),
            "gpareto": stats.genpareto(fits["gpareto"]["params"]["xi"], 0, fits["gpareto"]["params"]["sigma"]),
            "normal": stats.norm(fits["normal"]["params"]["mu"], fits["normal"]["params"]["sigma"]),
        }
        for dist, law in laws.items():
            d = stats.kstest(x, law.cdf).statistic
            check(
                abs(fits[dist]["ks_D"] - d) <= 1e-6 and fits[dist]["ks_n"] == len(x),
                f"{name}: {dist} KS D {fits[dist]['ks_D']!r} vs scipy {d!r}",
            )
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
