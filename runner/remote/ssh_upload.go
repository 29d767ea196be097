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

// Upload copies local to the absolute remote path over SFTP. It never
// leaves a partial file at remote: it writes a uniquely named temporary
// file in the same directory, fsyncs it, makes it 0755 and renames it into
// place with posix-rename (atomic, and fine while an old copy runs). A
// rename refused because another user's file is there (a sticky
// directory) takes that file when it is the same, and is a
// *ForeignFileError when it is not; see renameRefused. On any failure
// the temporary file is removed. Cancelling ctx aborts it.
func (s *SSH) Upload(ctx context.Context, local, remote string) (UploadResult, error) {
	if !path.IsAbs(remote) {
		return UploadResult{}, fmt.Errorf("remote path %q is not absolute", remote)
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

	// sha256sum on the host is far cheaper than reading the file back;
	// any failure (no file, no sha256sum) just means "upload it".
	if out, err := s.Run(ctx, []string{"sha256sum", "--", remote}); err == nil {
		if fields := strings.Fields(string(out)); len(fields) > 0 && fields[0] == sum {
			return UploadResult{UpToDate: true}, nil
		}
	} else if ctx.Err() != nil || errors.Is(err, ErrConnectionLost) {
		return UploadResult{}, err
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
	if err := c.MkdirAll(dir); err != nil {
		return UploadResult{}, s.uploadError(fmt.Errorf("create %s: %w", dir, err))
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := path.Join(dir, "."+path.Base(remote)+".tmp-"+hex.EncodeToString(rnd[:]))
	n, err := s.writeFile(c, tmp, f)
	if err == nil {
		if err = c.PosixRename(tmp, remote); err != nil {
			err = s.renameRefused(ctx, remote, sum, fmt.Errorf("rename into place: %w", err))
			if err == nil {
				// Another user's upload won the race with the same
				// node: take theirs.
				s.removeTemp(c, tmp)
				return UploadResult{UpToDate: true, BytesSent: n}, nil
			}
		}
	}
	if err != nil {
		s.removeTemp(c, tmp)
		if ctx.Err() != nil {
			return UploadResult{}, ctx.Err()
		}
		return UploadResult{}, s.uploadError(err)
	}
	return UploadResult{BytesSent: n}, nil
}

// renameRefused judges a rename into place that failed. In a sticky
// directory (/tmp, or a shared 1777 one) a user may not replace another
// user's file, so when several users deploy to one path the first upload
// wins: its file is accepted (nil) when its sha256 is sum, and refused
// with a *ForeignFileError, naming its owner, when it is not. Any other
// failure is renameErr.
func (s *SSH) renameRefused(ctx context.Context, remote, sum string, renameErr error) error {
	out, err := s.Run(ctx, []string{"stat", "-c", "%U", "--", remote})
	if err != nil {
		return renameErr
	}
	owner := strings.TrimSpace(string(out))
	if owner == s.user {
		return renameErr
	}
	out, err = s.Run(ctx, []string{"sha256sum", "--", remote})
	if err != nil {
		return renameErr
	}
	if fields := strings.Fields(string(out)); len(fields) > 0 && fields[0] == sum {
		return nil
	}
	return &ForeignFileError{Path: remote, Owner: owner, User: s.user, Err: renameErr}
}

// ForeignFileError is an upload refused because the remote path holds
// another user's file that is not this node, and the directory (sticky,
// like /tmp) does not let this user replace it.
type ForeignFileError struct {
	Path  string
	Owner string // the file's owner
	User  string // who uploaded
	Err   error  // the refused rename
}

func (e *ForeignFileError) Error() string {
	return fmt.Sprintf("%s belongs to %s and is not this node (its sha256 differs), and %s may not replace it: %v", e.Path, e.Owner, e.User, e.Err)
}

func (e *ForeignFileError) Unwrap() error { return e.Err }

// Hint says what to do.
func (e *ForeignFileError) Hint() string {
	return fmt.Sprintf("remove %s as %s or root so the next run deploys this node there, or set node.remote_path to a path no other user's node holds", e.Path, e.Owner)
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
