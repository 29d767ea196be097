// Package results is the contract between node and runner: both import it
// and nothing else of each other.
//
//   - schema.go and params.go: every parameter of an experiment (its plan
//     field, type, default, limits per transport, node flag) and every CSV
//     column, declared once. Package results/param names each parameter
//     by a constant generated from it, for code to look values up with.
//   - events.go: the JSON-lines events node prints and the runner reads.
//   - devices.go: `node devices` and `node version` output, and the rule
//     that picks a GID for an address.
//   - size.go: the size syntax plans and node flags share (4KiB, 1GB).
//   - challenge.go: the nonce and HMAC answer by which one side proves it
//     holds a secret; attach.go: node attach's handshake, which uses it.
//   - row.go and csvfile.go: the CSV row and the file that holds only whole
//     rows, reads every header rdmasweep has written, and upgrades older
//     ones.
package results
