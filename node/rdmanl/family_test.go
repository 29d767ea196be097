//go:build linux

package rdmanl

import "testing"

// TestFamily: a device's family is its provider's, from the uverbs driver
// id, as rdma-core picks the provider: irdma whether its PCI function is
// bound to ice or i40e.
func TestFamily(t *testing.T) {
	for id, want := range map[uint32]string{
		DriverMLX5: "mlx5", DriverIRDMA: "irdma", DriverRXE: "rxe", DriverSIW: "siw",
		DriverBNXTRE: "bnxt_re", DriverEFA: "efa", 0: "", 999: "",
	} {
		if got := Family(id); got != want {
			t.Errorf("Family(%d) = %q, want %q", id, got, want)
		}
	}
}
