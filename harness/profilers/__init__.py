"""L2 profilers: one module per backend (ncu, rocprofv3, sim).  Nothing outside this
package knows which vendor's tool produced a reading."""
