"""One module per outside tool: Nsight Compute, compute-sanitizer, the library GEMM, Triton."""
