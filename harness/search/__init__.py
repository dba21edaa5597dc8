"""Finding swizzles: the search sweeper (a Hydra sweeper plugin), its parameter space and
records, and the oracle for formula proposers."""
