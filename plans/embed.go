// Package plans holds the checked-in plans. loopback.yaml is also built
// into the runner, so `runner exec` with no plan runs it from anywhere.
package plans

import _ "embed"

// LoopbackName is how messages name the embedded plan.
const LoopbackName = "plans/loopback.yaml"

// Loopback is plans/loopback.yaml: both roles on this machine, tcp.
//
//go:embed loopback.yaml
var Loopback []byte
