package peer

import (
	"math"
	"testing"
)

// The parsers read what a remote tool wrote, so they must not panic on any
// input, and whatever they accept must be a figure a row can hold. The
// seed corpora in testdata/fuzz hold the real reports of testdata/PEER
// and cut or damaged ones.

func fuzzParse(f *testing.F, peer string) {
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Parse(peer, b)
		if err != nil {
			return
		}
		if r.Bytes <= 0 || !(r.Seconds > 0) || math.IsInf(r.Seconds, 0) {
			t.Fatalf("accepted %d bytes in %v s", r.Bytes, r.Seconds)
		}
		if !(r.BandwidthMBs > 0) || math.IsInf(r.BandwidthMBs, 0) {
			t.Fatalf("accepted bandwidth %v", r.BandwidthMBs)
		}
		if v := r.IOPS; v != nil && (*v < 0 || math.IsInf(*v, 0) || math.IsNaN(*v)) {
			t.Fatalf("accepted IOPS %v", *v)
		}
		for k, v := range r.Reported {
			if v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
				t.Fatalf("accepted %s %v", k, v)
			}
		}
		if l := r.Latency; l != nil {
			for _, v := range []float64{l.AvgUs, l.P50Us, l.P99Us, l.P999Us, l.MaxUs} {
				if v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
					t.Fatalf("accepted latency %+v", *l)
				}
			}
		}
	})
}

func FuzzParseIBReadBW(f *testing.F) { fuzzParse(f, IBReadBW) }
func FuzzParseIperf3(f *testing.F)   { fuzzParse(f, Iperf3) }
func FuzzParseFio(f *testing.F)      { fuzzParse(f, Fio) }

// FuzzListening: any output either errs or answers, never panics, and a
// port is found only when its number is in the output.
func FuzzListening(f *testing.F) {
	f.Add([]byte("State Recv-Q Send-Q Local Address:Port Peer Address:Port\nLISTEN 0 5 0.0.0.0:18515 0.0.0.0:*\n"), 18515)
	f.Fuzz(func(t *testing.T, b []byte, port int) {
		ok, err := Listening(b, port)
		if err == nil && ok && !containsPort(b, port) {
			t.Fatalf("port %d found in output without it", port)
		}
	})
}

func containsPort(b []byte, port int) bool {
	s := ":" + itoa(port)
	for i := 0; i+len(s) <= len(b); i++ {
		if string(b[i:i+len(s)]) == s {
			return true
		}
	}
	return false
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var d []byte
	for ; n > 0; n /= 10 {
		d = append([]byte{byte('0' + n%10)}, d...)
	}
	return string(d)
}
