package preflight

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rdmasweep/plan"
	"rdmasweep/runner/hosts/remote"
	"rdmasweep/runner/points/peer"
)

// nvmeofPoints expands a plan of node and nvmeof points over transport.
func nvmeofPoints(t *testing.T, transport string) []plan.Point {
	t.Helper()
	_, pts := expandPlan(t, `name: t
hosts: {server: {address: local}, client: {address: local}}
transport: `+transport+`
server: {file: /tmp/t.dat, file_size: 1MiB}
sweep: {matrix: {workload: [node, nvmeof]}}
`)
	return pts
}

// TestModulesFor: nvmeof's points need the target's modules on the
// server and the initiator's on the client, for their transport; node's
// need none.
func TestModulesFor(t *testing.T) {
	for _, tc := range []struct{ transport, role, want string }{
		{"rdma", "server", "nvmet nvmet-rdma"}, {"rdma", "client", "nvme-fabrics nvme-rdma"},
		{"tcp", "server", "nvmet nvmet-tcp"}, {"tcp", "client", "nvme-fabrics nvme-tcp"},
	} {
		var got []string
		for _, m := range ModulesFor(nvmeofPoints(t, tc.transport), tc.role) {
			got = append(got, m.Name)
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s %s: %v, want %s", tc.transport, tc.role, got, tc.want)
		}
	}
}

// TestMissingModules: a module no kernel has is missing, and a loaded one
// is not (any in /sys/module, its - for _ as node loads it); what this
// host says of nvmet-rdma is logged.
func TestMissingModules(t *testing.T) {
	ents, _ := os.ReadDir("/sys/module")
	loaded := "no-module-loaded"
	for _, e := range ents {
		if strings.Contains(e.Name(), "_") {
			loaded = strings.ReplaceAll(e.Name(), "_", "-")
			break
		}
	}
	m, err := MissingModules(context.Background(), remote.Local{}, []Module{{"nvmeof", "no-such-module-rdmasweep"}, {"nvmeof", loaded}, {"nvmeof", "nvmet-rdma"}})
	t.Logf("missing %v, %v", m, err)
	if err != nil || len(m) == 0 || m[0].Name != "no-such-module-rdmasweep" || (len(m) > 1 && m[1].Name == loaded) {
		t.Errorf("missing %v, %v; want no-such-module-rdmasweep first, and not %s (loaded)", m, err, loaded)
	}
}

// TestHasAuth: a kernel has nvmeof's DH-HMAC-CHAP on a role's host when
// that role's module depends on nvme-auth (modules.dep, as Debian's 7.x
// has it for nvmet and nvme-core) or nvme-auth is built in; 6.1's
// modules.dep, where neither names it, has none.
func TestHasAuth(t *testing.T) {
	auth, _ := peer.Lookup(peer.NVMeOF)
	for _, tc := range []struct {
		name, dep, builtin string
		want               map[string]bool
	}{
		{"7.x", "kernel/drivers/nvme/target/nvmet.ko.xz: kernel/drivers/nvme/common/nvme-keyring.ko.xz kernel/drivers/nvme/common/nvme-auth.ko.xz\n" +
			"kernel/drivers/nvme/host/nvme-core.ko.xz: kernel/drivers/nvme/common/nvme-auth.ko.xz\n", "", map[string]bool{"server": true, "client": true}},
		{"6.1", "kernel/drivers/nvme/target/nvmet.ko: kernel/drivers/nvme/host/nvme-core.ko\nkernel/drivers/nvme/host/nvme-core.ko:\n", "", map[string]bool{"server": false, "client": false}},
		{"host only", "kernel/drivers/nvme/target/nvmet.ko:\nkernel/drivers/nvme/host/nvme-core.ko: kernel/drivers/nvme/common/nvme-auth.ko\n", "", map[string]bool{"server": false, "client": true}},
		{"built in", "", "kernel/drivers/nvme/common/nvme-auth.ko\n", map[string]bool{"server": true, "client": true}},
	} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "modules.dep"), []byte(tc.dep), 0o644)
		os.WriteFile(filepath.Join(dir, "modules.builtin"), []byte(tc.builtin), 0o644)
		for role, want := range tc.want {
			got, err := hasAuthIn(context.Background(), remote.Local{}, dir, auth.Auth(role))
			if err != nil || got != want {
				t.Errorf("%s, %s: %v (%v), want %v", tc.name, role, got, err, want)
			}
		}
	}
	got, err := HasAuth(context.Background(), remote.Local{}, auth.Auth("server"))
	t.Logf("this host's kernel: DH-HMAC-CHAP on a server %v (%v)", got, err)
}
