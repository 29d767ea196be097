package deploy

import (
	"os"
	"path/filepath"
)

// BesideExecutable is the node file beside the running program, the
// default node.binary; "node" when the program cannot find itself.
func BesideExecutable() string {
	exe, err := os.Executable()
	if err != nil {
		return "node"
	}
	return filepath.Join(filepath.Dir(exe), "node")
}
