"""Triton kernels: the streaming top-k (:mod:`.stream`) and its parts."""
