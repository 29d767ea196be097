package results

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestDecodeRoundTrip(t *testing.T) {
	reg := 1.5
	gid := 1
	for _, ev := range []any{
		&Started{Type: TypeStarted, PID: 42, PGID: 42, Role: "serve", Version: "v1"},
		&Ready{Type: TypeReady, Transport: "rdma", Port: 18515, RegistrationS: &reg, RegistrationMBs: &reg, CachedFraction: 0.25, GIDIndex: &gid},
		&Result{Type: TypeResult, Bytes: 1 << 20, Seconds: 0.5, BandwidthMBs: 2.097152, Verified: true, CPUUserS: 0.25, CPUSysS: 0.125, CPUWallS: 0.5},
		&Done{Type: TypeDone, BytesServed: 1 << 20, Requests: 256, CPUUserS: 0.5, CPUSysS: 1, CPUWallS: 2},
		&Error{Type: TypeError, Message: "boom"},
		&Warning{Type: TypeWarning, Message: "careful"},
	} {
		line, _ := json.Marshal(ev)
		got, err := Decode(line)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		again, _ := json.Marshal(got)
		if string(again) != string(line) {
			t.Fatalf("round trip:\n got %s\nwant %s", again, line)
		}
	}
}

// A result or done line from a node older than the cpu fields still
// decodes; cpu_wall_s 0 says its CPU was not measured.
func TestDecodeWithoutCPU(t *testing.T) {
	ev, err := Decode([]byte(`{"type":"done","bytes_served":1,"requests":1,"seconds":1,"minor_faults":0,"major_faults":0}`))
	if err != nil {
		t.Fatal(err)
	}
	if d := ev.(*Done); d.CPUWallS != 0 || d.CPUUserS != 0 {
		t.Errorf("done without cpu fields decoded as %+v", d)
	}
}

func TestReadyRegistrationNullForTCP(t *testing.T) {
	line, _ := json.Marshal(&Ready{Type: TypeReady, Transport: "tcp", Port: 1})
	if !strings.Contains(string(line), `"registration_s":null`) {
		t.Fatalf("tcp ready must carry null registration figures: %s", line)
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, line := range []string{
		``, `not json`, `{}`, `{"type":"nope"}`, `{"type":"result","bytes":"many"}`,
		`{"type":"started","pid":1.5}`, `[1,2]`, `{"type":` + strings.Repeat(" ", MaxEventLine) + `"error"}`,
	} {
		if _, err := Decode([]byte(line)); !errors.Is(err, ErrNotEvent) {
			t.Errorf("Decode(%.40q) = %v, want ErrNotEvent", line, err)
		}
	}
}

// FuzzDecode checks the runner's parser of node's stdout never panics and
// that whatever it accepts re-encodes to an event it accepts again.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"type":"started","pid":7,"pgid":7,"role":"read","version":"dev"}`,
		`{"type":"ready","transport":"tcp","address":"127.0.0.1","port":4000,"registration_s":null,"registration_mb_s":null,"cached_fraction":1,"file_created":false}`,
		`{"type":"result","transport":"tcp","bytes":1048576,"reads":256,"seconds":0.01,"bandwidth_mb_s":104.8576,"iops":25600,"lat_avg_us":10,"lat_p50_us":9,"lat_p99_us":30,"lat_p999_us":40,"lat_max_us":50,"verified":true}`,
		`{"type":"done","bytes_served":1,"requests":1,"seconds":1,"minor_faults":0,"major_faults":0}`,
		`{"type":"error","message":"x"}`,
		`{"type":"warning","message":"y"}`,
		`{"type":"result","bytes":-1}`,
		`{"type":"ready","port":1e400}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		ev, err := Decode(line)
		if err != nil {
			if !errors.Is(err, ErrNotEvent) {
				t.Fatalf("error %v does not wrap ErrNotEvent", err)
			}
			return
		}
		again, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Decode(again); err != nil {
			t.Fatalf("re-encoded %s not accepted: %v", again, err)
		}
	})
}
