"""Every device kernel family compiles where no GPU is: CUDA text with NVRTC (PTX and cubin for sm_75
and sm_90), Metal text with clang's C++ front end against tests/metal/metal_stdlib (syntax and types
only: the Metal backend has not been run on Apple hardware by this project's CI)."""
import os
import shutil
import subprocess

import pytest

from lazytensor.kernels.cuda import nvrtc
from lazytensor.kernels.cuda.tiled import tiled_matmul
from lazytensor.kernels.gpu import CUDA, METAL, catalog, render
from lazytensor.kernels.gpu import reduce as gred

STUBS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "metal")
needs_nvrtc = pytest.mark.skipif(not nvrtc.available(), reason="NVRTC is not installed here "
                                 "(pip install nvidia-cuda-nvrtc-cu12; .ci/run installs it)")


@needs_nvrtc
@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
@pytest.mark.parametrize("output", ["ptx", "cubin"])
def test_every_cuda_kernel_family_compiles_with_nvrtc(arch, output):
    tiled = tiled_matmul((2,), 128, 64, 96, (8192,), (0,), "float32")
    image = nvrtc.compile_source(catalog.source(CUDA), "catalog", arch, output)
    assert image[:4] == b"\x7fELF" if output == "cubin" else b".version" in image
    image = nvrtc.compile_source(tiled.source(CUDA), tiled.name, arch, output, fmad=True)
    assert len(image) > 1000


@needs_nvrtc
def test_a_kernel_that_does_not_compile_reports_the_nvrtc_log():
    with pytest.raises(nvrtc.NvrtcError, match="identifier \"undefined_thing\" is undefined"):
        nvrtc.compile_source(CUDA.prelude() + '\nextern "C" __global__ void k() { undefined_thing(); }', "bad",
                             "sm_90")


@needs_nvrtc
def test_compiled_images_are_cached_on_disk_by_source_and_architecture(tmp_path, monkeypatch):
    monkeypatch.setenv("LAZYTENSOR_CACHE_DIR", str(tmp_path))
    spec = gred.axis_reduce("sum", (4, 5), "float32", (1,), "float32")
    source = render(spec, CUDA)
    first = nvrtc.compile_cached(source, spec.name, "sm_90")
    files = os.listdir(tmp_path / "cuda")
    assert len(files) == 1 and files[0].startswith(spec.name)
    assert nvrtc.compile_cached(source, spec.name, "sm_90") == first
    nvrtc.compile_cached(source, spec.name, "sm_75")
    assert len(os.listdir(tmp_path / "cuda")) == 2


def _clang_diagnostics(source):
    """Warnings and errors of a C++17 syntax-only parse of Metal source with the stub header."""
    args = ["-x", "c++", "-std=c++17", "-fsyntax-only", f"-I{STUBS}", "-Wall", "-Wno-unknown-attributes",
            "-Wno-unused-function"]
    try:
        import clang.cindex as ci
        tu = ci.Index.create().parse("kernels.metal", args=args, unsaved_files=[("kernels.metal", source)])
        return [f"{d.location.line}: {d.spelling}" for d in tu.diagnostics if d.severity >= 2]
    except ImportError:
        pass
    binary = shutil.which("clang++")
    if binary is None:
        pytest.skip("no clang front end here: pip install libclang (in the [test] extra) or install clang++")
    done = subprocess.run([binary, *args, "-"], input=source, capture_output=True, text=True)
    return [line for line in done.stderr.splitlines() if "warning:" in line or "error:" in line]


def test_every_metal_kernel_family_passes_a_clang_syntax_and_type_check():
    assert _clang_diagnostics(catalog.source(METAL)) == []


def test_the_metal_check_catches_a_type_error_and_float64():
    bad = METAL.prelude() + "\nkernel void k(device float* y [[buffer(0)]]) { y[0] = undefined_thing; }\n"
    assert any("undefined_thing" in d for d in _clang_diagnostics(bad))
    wide = METAL.prelude() + "\nkernel void k(device float* y [[buffer(0)]]) { double d = 1; y[0] = d; }\n"
    assert _clang_diagnostics(wide)


def test_rendering_a_float64_kernel_for_metal_is_refused():
    spec = gred.axis_reduce("sum", (4, 5), "float64", (1,), "float64")
    with pytest.raises(TypeError, match="metal has no float64"):
        render(spec, METAL)


def test_matrix_vector_and_skinny_products_take_the_one_thread_per_output_kernel_not_the_tiles():
    assert tiled_matmul((), 1, 512, 4096, (0,), (0,), "float32") is None       # a row vector times a matrix
    assert tiled_matmul((), 4096, 512, 8, (0,), (0,), "float32") is None       # 8 columns: 56 of 64 idle
    assert tiled_matmul((), 64, 512, 64, (0,), (0,), "float32") is not None
