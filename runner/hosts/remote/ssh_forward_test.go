package remote

import (
	"fmt"
	"testing"
)

// What /proc/net/tcp and tcp6 show for a forward on port 40000 (0x9C40):
// bound to the loopback, as asked, or to every address, as sshd binds it
// under GatewayPorts yes; and another port's wildcard listener.
func TestListening(t *testing.T) {
	const procNet = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:9C40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0
   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1 0 100 0 0 10 0
   2: 0100007F:9C40 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0 100 0 0 10 0
   3: 00000000:9C40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4 1 0 100 0 0 10 0
  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:9C40 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5 1 0 100 0 0 10 0
   1: 00000000000000000000000001000000:9C40 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 6 1 0 100 0 0 10 0
`
	got := fmt.Sprint(listening([]byte(procNet), 40000))
	if want := "[127.0.0.1 0.0.0.0 :: ::1]"; got != want {
		t.Errorf("Listening on 40000 = %s, want %s", got, want)
	}
	if got := listening([]byte(procNet), 22); fmt.Sprint(got) != "[0.0.0.0]" {
		t.Errorf("Listening on 22 = %v", got)
	}
}
