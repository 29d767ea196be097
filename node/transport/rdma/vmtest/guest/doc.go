// Package guest holds the tests that run inside the vmtest guest, on
// soft-RoCE (rxe0). They are compiled on the host into a static test binary
// (build tags rdma and rdmaguest) and run in the guest by the vmtest
// harness; they exec the static node given in $NODE.
package guest
