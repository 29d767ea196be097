package nvmeof

import "testing"

// TestConnectOptions: the line written to /dev/nvme-fabrics carries the
// point's queues and queue size when set, and the kernel's defaults
// (no option) when not; the key and host ID when given.
func TestConnectOptions(t *testing.T) {
	c := Conn{NQN: "nqn.s", HostNQN: "nqn.h", Transport: "rdma", Addr: "10.0.0.1", SvcID: 4420}
	base := "transport=rdma,traddr=10.0.0.1,trsvcid=4420,nqn=nqn.s,hostnqn=nqn.h,reconnect_delay=1,ctrl_loss_tmo=3"
	if got := c.options(); got != base {
		t.Errorf("defaults: %q, want %q", got, base)
	}
	c.IOQueues, c.QueueSize, c.HostID, c.Key = 4, 32, "id", "DHHC-1:00:k:"
	want := base + ",nr_io_queues=4,queue_size=32,hostid=id,dhchap_secret=DHHC-1:00:k:"
	if got := c.options(); got != want {
		t.Errorf("%q, want %q", got, want)
	}
}

// TestQueueSize: a depth within nvme-fabrics' range is the queue size;
// outside it, the nearest bound.
func TestQueueSize(t *testing.T) {
	for _, c := range []struct{ depth, want int }{{1, 16}, {16, 16}, {64, 64}, {128, 128}, {4096, 1024}} {
		if got := QueueSize(c.depth); got != c.want {
			t.Errorf("QueueSize(%d) = %d, want %d", c.depth, got, c.want)
		}
	}
}
