// Package rdma is node's RDMA transport: the server maps its region and
// registers it for remote reads only, the client connects reliable (RC)
// queue pairs to it and issues RDMA READs from a C loop.
//
// It is built with the rdma build tag and links libibverbs statically, with
// every rdma-core provider inside (see the Makefile's node-rdma target).
// Without the tag the package is a stub whose every entry point returns
// ErrNotBuilt, so a CGO_ENABLED=0 node still builds and says what is
// missing.
//
// The device is chosen by the address the connection uses (device.go,
// device_info.go). The connection setup is node's own exchange
// (exchange.go) or rdma_cm (cm.go). The C holds what cgo cannot reach, by
// concern: the verbs wrappers (shim_verbs.c), the connection manager
// (shim_cm.c), the read loop with its schedule (shim_loop.c) and the
// mirrors of Go code it needs (shim_mirror.c), all under shim.h's rules.
// The Go side holds the objects' lifetimes and turns failures into errors
// that name the verb, its errno and a hint.
package rdma
