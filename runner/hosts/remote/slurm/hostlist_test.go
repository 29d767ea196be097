package slurm_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rdmasweep/runner/hosts/remote/slurm"
	"rdmasweep/testbed/testenv"
)

// TestHostnamesAsScontrol expands each list as `scontrol show hostnames`
// does, and refuses what it refuses. scontrol needs only a slurm.conf to
// read, not a controller.
func TestHostnamesAsScontrol(t *testing.T) {
	scontrol := testenv.NeedTool(t, "scontrol", "slurm-client")
	conf := filepath.Join(t.TempDir(), "slurm.conf")
	if err := os.WriteFile(conf, []byte("ClusterName=x\nSlurmctldHost=localhost\nNodeName=n1\nPartitionName=p Nodes=n1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, list := range []string{
		"n1",
		"n1,n2,n3",
		"n[1-64]",
		"n[1-3,07-09],gpu[1-2]",
		"n[01-10]",
		"n[8-11]",
		"n[098-101]",
		"r[1-2]-n[01-02],plain,z[8-11]",
		"rack[1-2]-node[1-3]-x",
		"rack[1-2]-node[1-3]",
		"n[1-2]-x",
		"n[8-010]",
		"n[1-2],n1",
		"n[5]",
		"a,,b",
		"n[3-1]",
		"n[a-b]",
		"n[1-3",
		"n1]",
		"n[1-[2]]",
	} {
		cmd := exec.Command(scontrol, "show", "hostnames", list)
		cmd.Env = append(os.Environ(), "SLURM_CONF="+conf)
		out, serr := cmd.Output()
		want := strings.Fields(string(out))
		if serr == nil && len(want) == 0 {
			serr = errors.New("no names (Invalid hostlist)") // scontrol exits 0
		}
		got, err := slurm.Hostnames(list)
		switch {
		case serr != nil && err == nil:
			t.Errorf("%q: scontrol refuses it (%v), Hostnames gives %v", list, serr, got)
		case serr == nil && err != nil && len(want) > 0 && !strings.ContainsAny(strings.Join(want, ""), "[]"):
			t.Errorf("%q: Hostnames refuses it (%v), scontrol gives %v", list, err, want)
		case serr == nil && err == nil && !slices.Equal(got, want):
			t.Errorf("%q: Hostnames gives %v, scontrol %v", list, got, want)
		}
	}
}
