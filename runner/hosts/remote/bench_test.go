//go:build bench

package remote_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"rdmasweep/runner/hosts/remote"
	"rdmasweep/testbed/testenv"
	"rdmasweep/testbed/testhosts"
)

// TestBenchUpload compares the runner's uploader with OpenSSH's sftp, both
// with aes128-gcm@openssh.com, uploading 64 MiB to a namespace host in the
// same run, alternating, and prints the medians and their ratio (goal: the
// runner at 0.8 of sftp or better). Run with:
//
//	go test -tags bench -run TestBenchUpload -v ./runner/hosts/remote/
func TestBenchUpload(t *testing.T) {
	const (
		size   = 64 << 20
		rounds = 3
		cipher = "aes128-gcm@openssh.com"
	)
	n := testhosts.Start(t, testhosts.Options{Hosts: []string{"a"}})
	sftpBin := testenv.NeedTool(t, "sftp", "openssh-client")
	t.Setenv("SSH_AUTH_SOCK", "")
	a := n.Hosts["a"]

	src := filepath.Join(t.TempDir(), "node")
	data := make([]byte, size)
	rand.Read(data)
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	batch := filepath.Join(t.TempDir(), "batch")
	os.WriteFile(batch, []byte("put "+src+" "+testhosts.DeployDir+"/sftp-node\n"), 0o644)

	ctx := context.Background()
	cfg := config(t, n, a)
	cfg.Ciphers = []string{cipher}
	s := dial(t, cfg)

	var ours, theirs []float64
	mbps := func(d time.Duration) float64 { return float64(size) / 1e6 / d.Seconds() }
	for i := 0; i < rounds; i++ {
		start := time.Now()
		cmd := exec.Command(sftpBin, "-q", "-F", n.SSHConfig, "-c", cipher, "-b", batch, "a")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sftp: %v: %s", err, out)
		}
		theirs = append(theirs, mbps(time.Since(start)))

		a.Run(t, "rm", "-f", testhosts.DeployDir+"/bench/node") // a real upload each round
		start = time.Now()
		res, err := s.Upload(ctx, src, testhosts.DeployDir+"/bench/node")
		if err != nil || res.BytesSent != size {
			t.Fatalf("Upload: %+v, %v", res, err)
		}
		ours = append(ours, mbps(time.Since(start)))
	}
	mo, mt := median(ours), median(theirs)
	fmt.Printf("upload 64 MiB, %s, %d rounds, median:\n", cipher, rounds)
	fmt.Printf("  openssh sftp -b: %6.1f MB/s %v\n", mt, round(theirs))
	fmt.Printf("  runner Upload:   %6.1f MB/s %v\n", mo, round(ours))
	fmt.Printf("  ratio runner/sftp: %.2f (goal >= 0.8)\n", mo/mt)
	_ = remote.UploadResult{}
}

func median(x []float64) float64 {
	s := append([]float64(nil), x...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func round(x []float64) []string {
	var out []string
	for _, v := range x {
		out = append(out, fmt.Sprintf("%.1f", v))
	}
	return out
}
