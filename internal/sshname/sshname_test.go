package sshname

import "testing"

func TestHost(t *testing.T) {
	for _, ok := range []string{"a", "node-1.cluster.example", "10.0.0.1", "fe80::1%eth0", "[::1]", "h_1"} {
		if err := Host(ok); err != nil {
			t.Errorf("Host(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{
		"h$(touch /tmp/x)", "h$(touch${IFS}x)", "h`id`", "h;id", "h&", "h|id", "h>f", "h<f",
		"'h'", `"h"`, `h\n`, "h{a,b}", "a,b", "h b", "h\tb", "h\nb", "h\x7f", "-oProxyCommand=id",
	} {
		if err := Host(bad); err == nil {
			t.Errorf("Host(%q) = nil, want it refused", bad)
		}
	}
}

func TestUser(t *testing.T) {
	// OpenSSH lets a user name hold $, \ (not last) and a space not
	// followed by '-'.
	for _, ok := range []string{"root", "bench-user", "host$", `DOMAIN\user`, "a b", "first.last@example.org"} {
		if err := User(ok); err != nil {
			t.Errorf("User(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{
		"u$(touch x)", "u`id`", "u;id", "u&", "u|id", "u>f", "u<f", "'u'", `"u"`, "u{a}",
		"-oProxyCommand=id", "a -b", `user\`, "u\x01", "u\nid",
	} {
		if err := User(bad); err == nil {
			t.Errorf("User(%q) = nil, want it refused", bad)
		}
	}
}
