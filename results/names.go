package results

// The names that node, plan and the runner all spell, each written here
// once: code compares with these constants, never with a bare string.
const (
	// TransportTCP and TransportRDMA are the transports, as a plan's
	// transport: names them and node --transport takes them.
	TransportTCP  = "tcp"
	TransportRDMA = "rdma"

	// ConnectTCP and ConnectCM are rdma.connect's modes: node's own
	// exchange over TCP and its own QP transitions, or rdma_cm.
	ConnectTCP = "tcp"
	ConnectCM  = "cm"

	// SectionRDMA is the plan's rdma: section, which holds the rdma
	// transport's parameters.
	SectionRDMA = "rdma"

	// Network is the Go network (net.Dial, net.Listen) of every TCP
	// connection node and the runner open.
	Network = "tcp"
)

// The server's populate values (param populate).
const (
	PopulateFault    = "fault"    // registration or the reads fault the file in
	PopulateParallel = "parallel" // readers bring it in before ready
)

// The server's io values (param io).
const (
	IOMmap   = "mmap"   // the file mapped and registered, through the page cache
	IODirect = "direct" // O_DIRECT into a ring of buffers registered once
)

// DirectTCPBuffer is the size of the buffers io direct reads the file
// into over tcp (over rdma: mr_size).
const DirectTCPBuffer = 16 << 20
