package peer

// Readiness. A peer's server is ready when its port is listening. Nothing
// may connect to find out: ib_read_bw serves the first connection it
// accepts and iperf3 -s -1 exits after its one client, so a probe would
// use the run up. The runner runs ReadyCommand on the server's host until
// Listening says yes (or the server exits, or a timeout passes); for a
// server that listens through rdma_cm (ib_read_bw -R), which has no TCP
// socket, CMReadyCommand until CMListening says yes.

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// ReadyCommand is the argv that lists the host's listening TCP sockets,
// numerically, for Listening.
var ReadyCommand = []string{"ss", "-ltn"}

// Listening reports whether the output of `ss -ltn` shows a socket
// listening on port, on any address. It fails on output that is not ss's,
// so a missing or broken ss is not taken for "not yet".
func Listening(out []byte, port int) (bool, error) {
	if port <= 0 || port > 65535 {
		return false, fmt.Errorf("port %d out of range", port)
	}
	want := strconv.Itoa(port)
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	header := false
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if f[0] == "State" || f[0] == "Netid" {
			header = true
			continue
		}
		// State Recv-Q Send-Q Local-Address:Port Peer-Address:Port [Process]
		if len(f) < 5 || f[0] != "LISTEN" {
			return false, fmt.Errorf("not a line of ss -ltn: %.80q", sc.Text())
		}
		header = true
		local := f[3]
		i := strings.LastIndexByte(local, ':')
		if i < 0 {
			return false, fmt.Errorf("no port in local address %.80q", local)
		}
		if local[i+1:] == want {
			return true, nil
		}
	}
	if err := sc.Err(); err != nil {
		return false, fmt.Errorf("read ss output: %w", err)
	}
	if !header {
		return false, fmt.Errorf("empty ss output (is ss, from iproute2, installed?)")
	}
	return false, nil
}

// CMReadyCommand is the argv that lists the host's rdma_cm ids, as the
// kernel's resource tracking has them, for CMListening.
var CMReadyCommand = []string{"rdma", "resource", "show", "cm_id"}

// CMListening reports whether the output of `rdma resource show cm_id`
// shows an id of the TCP port space listening on port, on any address:
//
//	link rxe0/- cm-idn 3 state LISTEN ps TCP pid 812 comm ib_read_bw src-addr 0.0.0.0:18515 dst-addr 0.0.0.0:0
//
// A wildcard listener shows once per device. The words are read by name,
// since iproute2's versions differ in how they name the link. No ids at
// all is an empty output, so only a line without state and port space is
// an error.
func CMListening(out []byte, port int) (bool, error) {
	if port <= 0 || port > 65535 {
		return false, fmt.Errorf("port %d out of range", port)
	}
	want := ":" + strconv.Itoa(port)
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		kv := map[string]string{} // the words CMListening reads, by name
		for i := 0; i+1 < len(f); i++ {
			switch f[i] {
			case "state", "ps", "src-addr":
				kv[f[i]] = f[i+1]
			}
		}
		if kv["state"] == "" || kv["ps"] == "" {
			return false, fmt.Errorf("not a line of rdma resource show cm_id: %.80q", sc.Text())
		}
		if kv["state"] == "LISTEN" && kv["ps"] == "TCP" && strings.HasSuffix(kv["src-addr"], want) {
			return true, nil
		}
	}
	if err := sc.Err(); err != nil {
		return false, fmt.Errorf("read rdma output: %w", err)
	}
	return false, nil
}
