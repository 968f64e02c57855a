"""Code shared by the maintainer scripts (scripts/) and the tests, kept out of the product path.

Everything here except the emulators imports with torch and triton only, so the scripts that run on the GPU
machine (which has no executorch) can use it:

* `conv_cases`: random convolution cases, their tensors, the fp32 reference and the error tolerance;
* `suites`: the benchmark suites of bench/ (public and unseen convolutions) as cases;
* `timing`: the CUDA-graph timing harness of scripts/tune.py and scripts/bench_conv.py;
* `tuning_networks`: convolution layers of common networks, for tuning; `tuning_signatures`: those layers as
  tuning problems;
* `emulate_blob`, `emulate_pte`: run delegate blobs (and the edge program around them) on the CPU in Triton's
  interpreter the way the C++ runtime runs them (needs executorch; CPU only).

Nothing is imported by this file, so ``import cuda_triton.tools.timing`` loads that module alone.
"""
