// Package testbed is the root of the project's test support, kept apart
// from the product the way Go keeps net/http/httptest beside net/http:
//
//   - testhosts: real OpenSSH hosts in network namespaces (root);
//   - slurmlab: a real Slurm cluster, each slurmd in namespaces of its own
//     (root);
//   - netns: the namespace plumbing testhosts and slurmlab share;
//   - guest: the Debian guest under qemu with soft-RoCE and soft-iWARP, its
//     cached image, and the static node and in-guest tests it runs;
//   - clitest: a command-line program run as a person runs it, judged by
//     what it leaves (exit code, output, CSV, nodes on the hosts);
//   - testenv: a skip by hand that fails under CI=true.
//
// The conformance suites are not here: they stay beside the interfaces
// they test (runner/hosts/remote/hosttest beside remote.Host,
// node/transport/transporttest beside transport.Transport), as restic
// keeps internal/backend/test.
//
// Only tests import testbed. TestLayers in this package holds that line
// for every non-test package of the module, with the order of the
// top-level layers: testbed over runner over plan over results over
// internal, and node over results over internal.
package testbed
