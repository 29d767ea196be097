package guest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
)

// NewExt4Image makes path a sparse raw disk image of size bytes holding
// an empty ext4 filesystem, for Options.NVMe. It needs mkfs.ext4
// (e2fsprogs) on the host.
func NewExt4Image(ctx context.Context, path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("make disk image: %w", err)
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("make disk image %s: %w", path, err)
	}
	// -E nodiscard: the sparse file is already zero, and mkfs need not
	// discard it block by block.
	if out, err := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-E", "nodiscard", path).CombinedOutput(); err != nil {
		return fmt.Errorf("mkfs.ext4 %s: %w\n%s", path, err, out)
	}
	return nil
}
