package results

// NodeSHA256Env is the environment variable through which the runner's
// guard (runner/hosts/remote/deploypath.go) hands a deployed node the sha256 it
// expects of it. node, when it is set, checks its own executable against
// it before anything else, and unsets it (node/selfcheck.go).
const NodeSHA256Env = "RDMASWEEP_NODE_SHA256"
