"""The simulated Ascend host: stub distributions built at run time, loopback indexes, a fake CANN tree.

Shipped in the package so that `ascend-setup demo` and the test suite run the very same world."""
