"""swizzlebench: a Hydra sweep of verified, swizzled Triton conv2d kernels, logged to MLflow."""
