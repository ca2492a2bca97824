"""The kernels, by backend."""
