// Package sshname holds OpenSSH's rule for the host and user names it
// will hand to a shell (ssh_valid_hostname and ssh_valid_ruser in
// OpenSSH 10's readconf.c: ssh has refused such names on its command
// line since 9.6, and in -J since 2026). The plan loader refuses them in a
// plan, and the SSH client again before it expands %h, %r or %n into a
// ProxyCommand or a Match exec, so a name never becomes shell syntax on
// the runner's machine whichever way it arrived.
package sshname

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// hostUnsafe and userUnsafe are the characters OpenSSH refuses in a host
// name and a user name. A user name may hold $ and \ (Samba's machine
// accounts, DOMAIN\user) and spaces not followed by '-'; a host name
// none of these, nor a comma (ProxyJump's list separator).
const (
	hostUnsafe = "'`\"$\\;&<>|(){},"
	userUnsafe = "'`\";&<>|(){}"
)

// Host returns what makes OpenSSH refuse s as a host name, or nil: a
// leading '-' (an option to whatever the shell runs), or one of
// '`"$\;&<>|(){}, a space or a control character. The error names the
// character and its place, e.g. "'$' at byte 2".
func Host(s string) error {
	if strings.HasPrefix(s, "-") {
		return errors.New("a leading '-'")
	}
	for i, r := range s {
		if strings.ContainsRune(hostUnsafe, r) || isSpace(r) || isCntrl(r) {
			return unsafeAt(s, i, r)
		}
	}
	return nil
}

// User returns what makes OpenSSH refuse s as a remote user name, or
// nil: a leading '-', a control character or one of '`";&<>|(){}, a
// space followed by '-', or a trailing '\'.
func User(s string) error {
	if strings.HasPrefix(s, "-") {
		return errors.New("a leading '-'")
	}
	for i, r := range s {
		switch {
		case isCntrl(r), strings.ContainsRune(userUnsafe, r):
			return unsafeAt(s, i, r)
		case isSpace(r) && strings.HasPrefix(s[i+1:], "-"):
			return fmt.Errorf("a space followed by '-' at byte %d", i+1)
		case r == '\\' && i == len(s)-1:
			return errors.New("a trailing '\\'")
		}
	}
	return nil
}

// isSpace and isCntrl are C's isspace and iscntrl in the C locale, as
// OpenSSH applies them to each byte.
func isSpace(r rune) bool { return r == ' ' || r >= '\t' && r <= '\r' }
func isCntrl(r rune) bool { return r < ' ' || r == 0x7f }

func unsafeAt(s string, i int, r rune) error {
	what := fmt.Sprintf("%q", r)
	if r == ' ' {
		what = "a space"
	} else if !unicode.IsPrint(r) {
		what = fmt.Sprintf("the control character %U", r)
	}
	return fmt.Errorf("%s at byte %d", what, i+1)
}
