"""The lowest layer: what the GPU is, compiling a rung through NVRTC, the source checks, TMA descriptors and the types
a ladder is made of (docs/architecture.md)."""
