"""gradscope.fit and gradscope.select against `gradscope fit --json` on the same vector, the
refusals of bad input (dtype, device, layout, unknown methods, densities outside (0, 1], options a
method does not read), and docs/python.md's signatures against the functions themselves."""

import ast
import inspect
import json
import math
import pathlib
import re
import subprocess

import numpy as np
import pytest
import torch

import gradscope

RATIOS = (0.1, 0.01, 0.001)


def laplace(n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.distributions.Laplace(0.0, 1e-3).sample((n,)).float() * (1 + torch.rand(n, generator=g))


def cli_fit(gradscope_bin, tmp_path, values):
    path = tmp_path / "g.npy"
    np.save(path, values.numpy())
    out = subprocess.run([gradscope_bin, "fit", str(path), "--json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def same(a, b):
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return a == b


def test_fit_returns_what_the_cli_prints(gradscope_bin, tmp_path):
    t = laplace(60_000, 1).reshape(300, 200)  # any shape: read flattened
    py = gradscope.fit(t, ratios=RATIOS, backend="cpu")
    cli = cli_fit(gradscope_bin, tmp_path, t.flatten())
    assert list(py) == list(cli)  # the same keys, in the same order
    for key in cli:
        if key != "input":  # what was read: a file there, a tensor here
            assert same(py[key], cli[key]), key
    assert py["n"] == 60_000 and len(py["fits"]) == 4 and len(py["thresholds"]) == 8 * len(RATIOS)


def test_fit_takes_numpy_arrays():
    a = laplace(10_000, 2).numpy()
    assert gradscope.fit(a, ratios=(0.01,), backend="cpu")["n"] == 10_000


@pytest.mark.parametrize("method", ["topk", "sidco-e", "sidco-p", "sidco-gp", "sidco-topk", "redsync", "gaussianksgd"])
def test_select_agrees_with_the_cli_fit(gradscope_bin, tmp_path, method):
    t = laplace(200_000, 3)
    cli = cli_fit(gradscope_bin, tmp_path, t)
    for ratio in RATIOS:
        row = next(r for r in cli["thresholds"] if r["method"] == method and r["ratio"] == ratio)
        indices, values, info = gradscope.select(t, method, ratio, stages=row["stages"] if "sidco" in method else None)
        assert indices.dtype == torch.int64 and values.dtype == t.dtype
        assert torch.equal(values, t[indices])  # the tensor's own values, at ascending indices
        assert bool((indices[1:] > indices[:-1]).all())
        assert info["selected"] == len(indices)
        if method in ("topk", "sidco-topk"):  # exact: the same k elements
            assert info["selected"] == row["selected"] and info["quality"] == row["quality"]
            assert float(values.abs().min()) == row["threshold"]  # the k-th largest |t|
        else:
            # The same estimate; SIDCo's compressor pipeline sums its stages in other blocks,
            # so its threshold agrees to rounding and the selection to the elements at the edge.
            assert info["threshold"] == pytest.approx(row["threshold"], rel=1e-6)
            assert abs(info["selected"] - row["selected"]) <= 1
            if "sidco" in method:  # info["stages"] counts SIDCo's stages (0 for the others)
                assert info["stages"] == row["stages"]


def test_select_takes_every_sparse_selection_compressor():
    t = laplace(20_000, 4)
    for name in gradscope.sparse_selection_names():
        indices, values, info = gradscope.select(t, name, 0.01)
        assert 0 < len(indices) <= 20_000 and torch.equal(values, t[indices]), name


def test_select_and_fit_share_the_default_stage_count():
    t = laplace(100_000, 7)
    assert [gradscope.default_sidco_stages(r) for r in (0.5, 0.1, 0.03, 0.01, 0.001, 1e-4)] == [1, 1, 2, 2, 3, 4]
    ratios = (0.1, 0.01, 0.001)
    fit_rows = {(r["method"], r["ratio"]): r for r in gradscope.fit(t, ratios=ratios, backend="cpu")["thresholds"]}
    for method in ("sidco-e", "sidco-p", "sidco-gp"):
        for ratio in ratios:
            _, _, info = gradscope.select(t, method, ratio, backend="cpu")  # no stages given
            assert info["stages"] == fit_rows[(method, ratio)]["stages"], (method, ratio)
            assert info["stages"] == gradscope.default_sidco_stages(ratio), (method, ratio)
            assert 0.8 < info["quality"] < 1.25, (method, ratio, info)


def test_no_sidco_variant_selects_nothing_from_a_vector_with_values():
    # 99% of the magnitudes at the maximum: the fitted laws put the threshold at or above it
    # (sidco-e at 4.6 with one stage); the selection then falls back to the exact top-k.
    t = torch.cat([torch.ones(9900), torch.full((100,), 0.5)])[
        torch.randperm(10_000, generator=torch.Generator().manual_seed(1))
    ]
    for method in ("sidco-e", "sidco-p", "sidco-gp"):
        for stages in (1, 2, 3):
            _, values, info = gradscope.select(t, method, 0.01, stages=stages, backend="cpu")
            assert info["selected"] > 0 and len(values) == info["selected"], (method, stages, info)


def test_the_cuda_backends_code_selects_what_the_cpu_selects():
    # backend="cuda-host" runs the CUDA backend's pass code on the host and reads the tensor in
    # place (compress_resident), as backend="cuda" reads a CUDA tensor on a GPU machine.
    t = laplace(50_000, 9)
    for name in ("topk", "sidco-topk", "dgc", "sidco-e", "redsync"):
        i_cpu, v_cpu, info_cpu = gradscope.select(t, name, 0.01, backend="cpu")
        i_dev, v_dev, info_dev = gradscope.select(t, name, 0.01, backend="cuda-host")
        assert info_dev["selected"] == len(i_dev) and torch.equal(v_dev, t[i_dev]), name
        if name.startswith("sidco-e"):  # the same threshold up to the rounding of its sums
            assert info_dev["threshold"] == pytest.approx(info_cpu["threshold"], rel=1e-6)
            above = torch.nonzero(t.abs() > info_dev["threshold"]).flatten()
            assert torch.equal(i_dev, above)
        else:
            assert torch.equal(i_cpu, i_dev) and torch.equal(v_cpu, v_dev), name
    core = gradscope._gradscope.Compressor("topk", 0.01, {"backend": "cuda-host"})
    assert core.resident_backend == "cuda-host"
    quantizer = gradscope._gradscope.Compressor("qsgd-mn", 1.0, {})
    assert quantizer.resident_backend is None
    with pytest.raises(gradscope.Error, match="reads host memory only"):
        quantizer.compress_resident(t.data_ptr(), t.numel(), "t")


@pytest.mark.parametrize(
    "bad, error, words",
    [
        (torch.zeros(10, dtype=torch.float64), TypeError, "float64"),
        (torch.zeros(10, dtype=torch.int32), TypeError, "int32"),
        (torch.zeros(10, 10).t(), ValueError, "not contiguous"),
        (torch.zeros(10, 10)[:, 0], ValueError, "not contiguous"),
        (torch.zeros(10, device="meta"), ValueError, "meta"),
        (torch.zeros(10).to_sparse(), ValueError, "sparse"),
        (np.zeros(10, dtype=np.float64), TypeError, "float64"),
        ([1.0, 2.0], TypeError, "list"),
    ],
)
def test_bad_tensors_are_refused_naming_the_problem(bad, error, words):
    for call in (lambda: gradscope.fit(bad), lambda: gradscope.select(bad)):
        with pytest.raises(error, match=words):
            call()


def test_bad_methods_and_densities_are_refused():
    t = laplace(1000, 5)
    with pytest.raises(ValueError, match="unknown selection method 'sidco-x'"):
        gradscope.select(t, "sidco-x")
    with pytest.raises(ValueError, match="qsgd-mn"):  # a quantizer sends codes, not a selection
        gradscope.select(t, "qsgd-mn")
    for ratio in (0.0, -0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="outside"):
            gradscope.select(t, "topk", ratio)
    with pytest.raises(TypeError, match="ratio"):
        gradscope.select(t, "topk", "a lot")


def test_core_errors_arrive_with_the_cli_message(gradscope_bin, tmp_path):
    t = laplace(1000, 6)
    with pytest.raises(gradscope.Error) as py_error:
        gradscope.fit(t, backend="cuda")  # no GPU, or no CUDA backend: the core says which
    np.save(tmp_path / "t.npy", t.numpy())
    cli = subprocess.run(
        [gradscope_bin, "fit", str(tmp_path / "t.npy"), "--backend", "cuda"], capture_output=True, text=True
    )
    assert cli.returncode == 1
    # The same message, with the CLI's flag written as the Python keyword.
    assert "--backend cpu or auto" in cli.stderr
    assert cli.stderr.strip().replace("--backend", "backend") == f"gradscope: error: {py_error.value}"
    assert isinstance(py_error.value, ValueError)
    with pytest.raises(ValueError, match="ratio"):
        gradscope.fit(t, ratios=(2.0,))


def test_fashion_mnist_comes_as_normalized_tensors(monkeypatch, tmp_path):
    x, y = gradscope.fashion_mnist("test")
    assert x.shape == (10000, 1, 28, 28) and x.dtype == torch.float32
    assert y.shape == (10000,) and y.dtype == torch.int64
    assert int(y.min()) == 0 and int(y.max()) == 9
    assert torch.bincount(y).tolist() == [1000] * 10  # the test split is balanced
    # (pixel / 255 - mean) / std: a black pixel is -mean / std, a white one (1 - mean) / std.
    assert math.isclose(float(x.min()), -0.2860 / 0.3530, rel_tol=1e-6)
    assert math.isclose(float(x.max()), (1 - 0.2860) / 0.3530, rel_tol=1e-6)
    head, head_y = gradscope.fashion_mnist("test", count=5)
    assert torch.equal(head, x[:5]) and torch.equal(head_y, y[:5])
    monkeypatch.setenv("GS_FASHION_MNIST_DIR", str(tmp_path))
    with pytest.raises(gradscope.Error, match="dataset-fashion-mnist"):
        gradscope.fashion_mnist("train")


def test_errors_are_runtime_errors_in_pythons_words():
    assert issubclass(gradscope.Error, RuntimeError) and issubclass(gradscope.Error, ValueError)
    t = laplace(1000, 8)
    with pytest.raises(gradscope.Error, match=r"^backend='gpu' is not one of auto, cpu, cuda"):
        gradscope.select(t, "topk", 0.01, backend="gpu")
    with pytest.raises(gradscope.Error, match=r"^stages='x' is not an integer"):
        gradscope.select(t, "sidco-e", 0.01, stages="x")


def test_fit_takes_one_ratio_or_several_in_the_range_select_takes():
    t = laplace(20_000, 10)
    one = gradscope.fit(t, ratios=0.01, backend="cpu")
    assert one == gradscope.fit(t, ratios=[0.01], backend="cpu")
    assert {r["ratio"] for r in one["thresholds"]} == {0.01}
    # Density 1, which select and State take, is a density fit takes too: everything finite kept.
    t[7] = float("nan")
    whole = gradscope.fit(t, ratios=(1.0, 0.1), backend="cpu")
    at_one = [r for r in whole["thresholds"] if r["ratio"] == 1.0]
    assert len(at_one) == len(gradscope.sparse_selection_names()) - 1  # every threshold method
    for r in at_one:
        assert r["threshold"] == 0.0 and r["selected"] == 19_999, r
    _, _, info = gradscope.select(t, "topk", 1.0, backend="cpu")
    assert info["selected"] == 19_999
    # The same refusals, from the same check, with the same words.
    for bad in (0.0, -0.1, 1.5, float("nan")):
        for call in (
            lambda: gradscope.fit(t, ratios=bad),
            lambda: gradscope.fit(t, ratios=(0.1, bad)),
            lambda: gradscope.select(t, "topk", bad),
        ):
            with pytest.raises(ValueError, match=r"is outside \(0, 1\]"):
                call()
    # A comma list as analyze takes it; each error names the option.
    assert [r["ratio"] for r in gradscope.fit(t, ratios="0.1")["thresholds"]] == [0.1] * len(at_one)
    with pytest.raises(ValueError, match=r"^ratios: 'a lot' is not a comma list"):
        gradscope.fit(t, ratios="a lot")
    with pytest.raises(TypeError, match=r"^ratios: ratio must be a real number"):
        gradscope.fit(t, ratios=(0.1, "0.01"))
    with pytest.raises(ValueError, match="ratios: none given"):
        gradscope.fit(t, ratios=())


def test_options_a_method_does_not_read_are_refused():
    t = laplace(5000, 11)
    refused = [
        (dict(method="topk", stages=2), "stages does nothing for compressor 'topk'"),
        (dict(method="sidco-e", seed=7), "seed does nothing for compressor 'sidco-e'"),
        (dict(method="randomk", backend="cuda-host"), "backend does nothing for compressor 'randomk'"),
    ]
    for kw, words in refused:
        with pytest.raises(gradscope.Error, match=re.escape(words)) as e:
            gradscope.select(t, ratio=0.01, **kw)
        assert "reads" in str(e.value)  # and says what the method does read
    # What each method reads is the C++ registry's row, the same that gradscope train checks.
    rows = {r["name"]: r["options"] for r in gradscope._gradscope.compressors()}
    assert rows["sidco-e"] == ["backend", "stages", "sidco_as_published", "sidco_estimate"] and rows["dgc"] == [
        "seed",
        "backend",
    ]
    assert rows["qsgd-mn"] == ["seed", "bits"] and rows["none"] == []
    for name in gradscope.sparse_selection_names():  # every option a method reads is taken
        kw = {"stages": 2} if "stages" in rows[name] else {}
        kw.update({"seed": 7} if "seed" in rows[name] else {})
        kw.update({"backend": "cuda-host"} if "backend" in rows[name] else {})
        assert gradscope.select(t, name, 0.01, **kw)[2]["selected"] > 0, name
    assert gradscope.select(t, "topk", 0.01, stages=None)[2]["selected"] == 50  # None: not given


def test_ddp_state_refuses_options_and_ratios_that_do_nothing():
    # Refused before anything else (no process group is needed to say so).
    with pytest.raises(
        gradscope.Error,
        match=re.escape(
            "bits does nothing for compressor 'sidco-e': "
            "drop it (sidco-e reads backend, stages, sidco_as_published, sidco_estimate)"
        ),
    ):
        gradscope.ddp.State("sidco-e", bits=3)
    with pytest.raises(gradscope.Error, match="seed does nothing for compressor 'sidco-e'"):
        gradscope.ddp.State("sidco-e", 0.01, seed=3)
    # A method that is not density-based takes no ratio but 1, and says why.
    with pytest.raises(
        ValueError, match="ratio 0.01 does nothing for compressor 'qsgd-mn': it is not " "density-based"
    ):
        gradscope.ddp.State("qsgd-mn", 0.01)
    with pytest.raises(ValueError, match="outside"):
        gradscope.ddp.State("sidco-e", 1.5)
    # Accepted as far as the process group, which this test has none of.
    for args, kw in (
        (("qsgd-mn",), {"bits": 3, "seed": 2}),
        (("qsgd-mn", 1.0), {}),
        (("none",), {}),
        (("sidco-e",), {"stages": 2, "backend": "cpu"}),
        (("randomk", 0.1), {"backend": "cpu"}),
    ):
        with pytest.raises(gradscope.Error, match="needs torch.distributed"):
            gradscope.ddp.State(*args, **kw)


# ---- docs/python.md and the functions' own signatures and docstrings -------------------------

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "python.md"


def _call_at(text, start):
    """The text between the parenthesis opening at `start` and the one closing it."""
    depth = 0
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return text[start + 1 : i]
    raise AssertionError(f"unbalanced parentheses in docs/python.md at {text[start:start + 60]!r}")


def documented_signatures():
    """{dotted name: inspect.Signature} of every `gradscope.NAME(PARAMETERS)` that docs/python.md's
    API section writes as a statement of a code block or as inline code (a call written with values,
    not parameters, is no signature and is left out)."""
    text = DOCS.read_text()
    start = text.index("\n## The API")
    api = text[start : text.index("\n## ", start + 1)]
    blocks = re.findall(r"```python\n(.*?)```", api, re.S)
    inline = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", api, flags=re.S))
    found = {}
    for piece in blocks + inline:
        for m in re.finditer(r"^(?:\w+ = )?gradscope\.([\w.]+)\(", piece, re.M):
            params = _call_at(piece, m.end() - 1)
            try:
                tree = ast.parse(f"def f({params}): pass")
            except SyntaxError:
                continue
            found[m.group(1)] = _signature(tree.body[0].args)
    return found


def _signature(args):
    P = inspect.Parameter
    defaults = [None] * (len(args.args) - len(args.defaults)) + list(args.defaults)
    params = [
        P(a.arg, P.POSITIONAL_OR_KEYWORD, default=P.empty if d is None else ast.literal_eval(d))
        for a, d in zip(args.args, defaults)
    ]
    params += [
        P(a.arg, P.KEYWORD_ONLY, default=P.empty if d is None else ast.literal_eval(d))
        for a, d in zip(args.kwonlyargs, args.kw_defaults)
    ]
    if args.kwarg:
        params.append(P(args.kwarg.arg, P.VAR_KEYWORD))
    return inspect.Signature(params)


def _resolve(dotted):
    obj = gradscope
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def test_the_docs_write_the_real_signatures():
    documented = documented_signatures()
    assert {"fit", "select", "Recorder", "ddp.State", "fashion_mnist"} <= set(documented), documented
    for name, doc in documented.items():
        real = _unannotated(inspect.signature(_resolve(name)))
        assert str(doc) == str(real), f"docs/python.md writes gradscope.{name}{doc}, the code has {real}"


def _unannotated(signature):
    """The signature without its annotations (the docs write the names and defaults)."""
    P = inspect.Parameter
    return signature.replace(
        parameters=[p.replace(annotation=P.empty) for p in signature.parameters.values()],
        return_annotation=inspect.Signature.empty,
    )


def test_the_states_signature_is_its_table_of_settings():
    """State.__init__ spells its keywords out, annotated, for type checkers and IDEs; the table of
    settings (state_dict, pickling, the ranks' agreement) holds the same names, kinds and defaults,
    in the same order."""
    from gradscope._state_settings import SIGNATURE

    real = inspect.signature(gradscope.ddp.State.__init__)
    params = list(real.parameters.values())[1:]  # self
    assert [(p.name, p.kind, p.default) for p in params] == [
        (p.name, p.kind, p.default) for p in SIGNATURE.parameters.values()
    ]
    assert all(p.annotation is not inspect.Parameter.empty for p in params), real
    # every keyword but the method and the ratio by keyword only: a new row changes no positional call
    assert [p.name for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD] == ["method", "ratio"]


def test_the_extensions_stub_is_what_the_built_module_makes():
    """python/gradscope/_gradscope.pyi is made from the built module (scripts/gradscope_stub.py):
    an IDE and mypy see what the extension takes and returns, and the stub cannot drift from it."""
    import sys

    root = pathlib.Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "scripts"))
    try:
        import gradscope_stub
    finally:
        sys.path.pop(0)
    committed = (root / "python" / "gradscope" / "_gradscope.pyi").read_text()
    assert (
        gradscope_stub.stub(gradscope._gradscope) == committed
    ), "the stub is out of date: run PYTHONPATH=build/python python3 scripts/gradscope_stub.py"
    assert (root / "python" / "gradscope" / "py.typed").exists()


def _paragraph(doc, name):
    """The docstring's paragraph on parameter `name` ("name: ..." up to the next "word: ")."""
    m = re.search(rf"(?:^|\n)\s*{name}: (.*?)(?=\n\s*\w+: |\Z)", doc, re.S)
    assert m, f"the docstring says nothing of {name}"
    return " ".join(m.group(1).split())


@pytest.mark.parametrize("function", [gradscope.fit, gradscope.select])
def test_help_names_the_defaults_of_the_signature(function):
    # help(gradscope.select) shows the signature and the docstring: they must not disagree.
    for p in inspect.signature(function).parameters.values():
        if p.default is inspect.Parameter.empty:
            continue
        text = _paragraph(function.__doc__, p.name)
        shown = '"' + p.default + '"' if isinstance(p.default, str) else repr(p.default)
        assert re.search(r"default:? " + re.escape(shown), text), (p.name, shown, text)
