package remote_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"rdmasweep/runner/hosts/remote"
	"rdmasweep/testbed/testenv"
)

const ttyChild = "RDMASWEEP_TTY_CHILD"

// TestTerminalPassphrase asks for a passphrase the way a person sees it: a
// child process whose controlling terminal is a pseudo-terminal the test
// types into. The prompt names the key, the typed passphrase is not
// echoed, and it arrives. With no controlling terminal there is no asker.
func TestTerminalPassphrase(t *testing.T) {
	if os.Getenv(ttyChild) != "" {
		ask := remote.TerminalPassphrase()
		if ask == nil {
			fmt.Println("NO TERMINAL")
			return
		}
		b, err := ask("/keys/id_test")
		fmt.Printf("GOT[%s] %v\n", b, err)
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := func() *exec.Cmd {
		cmd := exec.Command(exe, "-test.run=^TestTerminalPassphrase$")
		cmd.Env = append(os.Environ(), ttyChild+"=1")
		return cmd
	}

	// No controlling terminal: a new session, no tty opened.
	cmd := child()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), "NO TERMINAL") {
		t.Errorf("without a terminal: %v: %s", err, out)
	}

	master, slave := openPTY(t)
	defer master.Close()
	cmd = child()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	var mu sync.Mutex
	var screen bytes.Buffer
	go func() {
		buf := make([]byte, 256)
		for {
			n, err := master.Read(buf)
			mu.Lock()
			screen.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	waitFor := func(s string) string {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			mu.Lock()
			got := screen.String()
			mu.Unlock()
			if strings.Contains(got, s) {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("terminal never showed %q; it shows %q", s, got)
			}
		}
	}
	waitFor("Enter passphrase for key '/keys/id_test': ")
	master.Write([]byte("sesame\n"))
	got := waitFor("GOT[sesame] <nil>")
	if strings.Count(got, "sesame") != 1 {
		t.Errorf("the passphrase was echoed: %q", got)
	}
	cmd.Wait()
}

// openPTY opens a pseudo-terminal pair.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		testenv.Skip(t, "no pseudo-terminals: "+err.Error())
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}
