package remote

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"github.com/pkg/sftp"
)

// Upload copies local to the absolute remote path over SFTP, into a
// directory only the login user may change (see deploypath.go): a
// missing directory is made 0700, and one that another user owns, or
// group or others may write (or a directory above it, unless sticky and
// root's), is refused with an *UnsafePathError before anything is sent.
// It never leaves a partial file at remote: it writes a uniquely named
// temporary file in the same directory (O_EXCL), fsyncs it, makes it
// 0755 and renames it into place with posix-rename (atomic, and fine
// while an old copy runs), then checks the file again, owner, mode and
// sha256, as it will be checked before every exec. On any failure the
// temporary file is removed. Cancelling ctx aborts it.
func (s *SSH) Upload(ctx context.Context, local, remote string) (UploadResult, error) {
	if !path.IsAbs(remote) || path.Clean(remote) != remote || remote == "/" {
		return UploadResult{}, fmt.Errorf("remote path %q is not an absolute, clean file path", remote)
	}
	f, err := os.Open(local)
	if err != nil {
		return UploadResult{}, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return UploadResult{}, fmt.Errorf("hash %s: %w", local, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return UploadResult{}, err
	}

	// One command makes the directory if need be, checks it, and hashes
	// the file there if it is one that may be run: sha256sum on the host
	// is far cheaper than reading the file back.
	have, sig, err := s.guardedSum(ctx, remote)
	if err != nil {
		return UploadResult{}, err
	}
	if have == sum {
		s.deployed.AddChecked(remote, sum, sig)
		return UploadResult{UpToDate: true}, nil
	}

	if s.lost.Load() {
		return UploadResult{}, s.lostErr()
	}
	c, err := s.sftpClient(ctx)
	if err != nil {
		if noise, ok := s.noise.Load().(string); ok && !s.lost.Load() {
			return UploadResult{}, &NoisyShellError{Err: fmt.Errorf("start sftp: %w", err), User: s.user, Noise: noise}
		}
		return UploadResult{}, s.uploadError(fmt.Errorf("start sftp: %w", err))
	}
	defer c.Close()
	// sftp calls take no ctx; closing the client unblocks them.
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()

	dir := path.Dir(remote)
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := path.Join(dir, "."+path.Base(remote)+".tmp-"+hex.EncodeToString(rnd[:]))
	n, err := s.writeFile(c, tmp, f)
	if err == nil {
		if err = c.PosixRename(tmp, remote); err != nil {
			err = fmt.Errorf("rename into place: %w", err)
		}
	}
	if err != nil {
		s.removeTemp(c, tmp)
		if ctx.Err() != nil {
			return UploadResult{}, ctx.Err()
		}
		return UploadResult{}, s.uploadError(err)
	}
	// The file as every exec will find it.
	have, sig, err = s.guardedSum(ctx, remote)
	if err != nil {
		return UploadResult{}, err
	}
	if have != sum {
		return UploadResult{}, fmt.Errorf("check %s after the upload: its sha256 is %s, not %s", remote, have, sum)
	}
	s.deployed.AddChecked(remote, sum, sig)
	return UploadResult{BytesSent: n}, nil
}

// guardedSum runs GuardSumArgv for remote: its sha256 and signature (see
// Deployed), "-" when there is no file that may be run there, or an
// *UnsafePathError.
func (s *SSH) guardedSum(ctx context.Context, remote string) (sum, sig string, err error) {
	out, err := s.Run(ctx, GuardSumArgv(remote))
	if err != nil {
		var ee *ExitError
		if errors.As(err, &ee) && len(ee.Stderr) > 0 {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", "", s.uploadError(fmt.Errorf("check %s: %w", path.Dir(remote), err))
	}
	fields := strings.Fields(string(out))
	if len(fields) == 0 {
		return "", "", fmt.Errorf("check %s: no answer", remote)
	}
	if len(fields) > 1 {
		sig = fields[1]
	}
	return fields[0], sig, nil
}

func (s *SSH) writeFile(c *sftp.Client, tmp string, src *os.File) (int64, error) {
	w, err := c.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return 0, fmt.Errorf("create %s: %w", tmp, err)
	}
	// src is an *os.File, so ReadFrom knows the size and writes
	// concurrently.
	n, err := w.ReadFrom(src)
	if err != nil {
		w.Close()
		return n, fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := w.Sync(); err != nil {
		w.Close()
		return n, fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err := w.Chmod(0o755); err != nil {
		w.Close()
		return n, fmt.Errorf("chmod %s: %w", tmp, err)
	}
	if err := w.Close(); err != nil {
		return n, fmt.Errorf("close %s: %w", tmp, err)
	}
	return n, nil
}

// removeTemp removes a failed upload's temporary file, through the sftp
// client if it still works, else through a fresh session.
func (s *SSH) removeTemp(c *sftp.Client, tmp string) {
	if err := c.Remove(tmp); err == nil || errors.Is(err, os.ErrNotExist) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.Run(ctx, []string{"rm", "-f", "--", tmp})
}

// NoisyShellError is an SFTP start that failed on a host whose login shell
// prints on stdout. sshd runs the sftp subsystem through that shell, so
// the output lands in the SFTP stream (OpenSSH's sftp fails the same way).
type NoisyShellError struct {
	Err   error
	User  string
	Noise string // what the shell printed
}

func (e *NoisyShellError) Error() string {
	noise := e.Noise
	if len(noise) > 60 {
		noise = noise[:60] + "…"
	}
	return fmt.Sprintf("%v: the login shell of %s prints %q on stdout before any command", e.Err, e.User, noise)
}

func (e *NoisyShellError) Unwrap() error { return e.Err }

// Hint says how to quiet the shell.
func (e *NoisyShellError) Hint() string {
	return "make the startup files (~/.bashrc, ~/.profile) print only in interactive shells, e.g. guard with: case $- in *i*) ;; *) return;; esac; or set \"Subsystem sftp internal-sftp\" in the host's sshd_config"
}

func (s *SSH) uploadError(err error) error {
	if s.lost.Load() {
		return s.lostErr()
	}
	return err
}

// sftpClient starts the sftp subsystem on a session from newSession, so
// a host that limits sessions per connection gets one on another
// connection. Closing the client ends the session.
func (s *SSH) sftpClient(ctx context.Context) (*sftp.Client, error) {
	sess, err := s.newSession(ctx)
	if err != nil {
		return nil, err
	}
	w, err := sess.StdinPipe()
	if err != nil {
		sess.Close()
		return nil, err
	}
	r, err := sess.StdoutPipe()
	if err != nil {
		sess.Close()
		return nil, err
	}
	if err := sess.RequestSubsystem("sftp"); err != nil {
		sess.Close()
		return nil, err
	}
	c, err := sftp.NewClientPipe(r, w, sftp.UseConcurrentWrites(true))
	if err != nil {
		sess.Close()
		return nil, err
	}
	go func() {
		c.Wait()
		sess.Close()
	}()
	return c, nil
}
