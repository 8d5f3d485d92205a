package kernelrt

// Serial runs every op in the calling goroutine with the default kernels (see DefaultKernels):
// its methods, generated from the op list, are the package functions. It implements Ops, so
// code written against Ops (a model, the parity suite) runs serially or on a Runtime. The zero
// value is ready to use and safe for concurrent use.
type Serial struct{}
