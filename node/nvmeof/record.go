package nvmeof

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"rdmasweep/node/procstat"
)

// A record is Records/NAME.json, one per Made, written before each step
// and removed once all of it is gone. It holds the maker's pid and start
// time, so Clean knows a record whose maker is gone from one in use.

// record names m's record and writes it.
func (s Sys) record(m *Made) error {
	if err := os.MkdirAll(s.Records, 0o700); err != nil {
		return fmt.Errorf("make the record directory: %w", err)
	}
	side := "target"
	if m.Target.Serial == "" && len(m.Paths) == 0 && m.PortID == 0 {
		side = "host"
	}
	m.record = filepath.Join(s.Records, side+"-"+safeName(m.Target.NQN)+".json")
	m.Start = procstat.StartTime(m.PID)
	return s.save(m)
}

// save writes m's record whole (a new file renamed over the old).
func (s Sys) save(m *Made) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tmp := m.record + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("record what is made: %w", err)
	}
	if err := os.Rename(tmp, m.record); err != nil {
		return fmt.Errorf("record what is made: %w", err)
	}
	return nil
}

// Clean removes what every record of a process that is gone lists: a
// target's configfs paths, a host's controller. nqn, when set, limits it
// to that run's records. It returns what it removed, one line each.
func (s Sys) Clean(ctx context.Context, nqn string) ([]string, error) {
	ents, err := os.ReadDir(s.Records)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the records %s: %w", s.Records, err)
	}
	var done []string
	var errs []error
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") || ctx.Err() != nil {
			continue
		}
		p := filepath.Join(s.Records, e.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		m := &Made{}
		if err := json.Unmarshal(b, m); err != nil {
			errs = append(errs, fmt.Errorf("record %s: %w", p, err))
			continue
		}
		m.record = p
		if (nqn != "" && m.Target.NQN != nqn) || (m.Start != "" && procstat.StartTime(m.PID) == m.Start) {
			continue // another run's, or its maker still runs
		}
		what := fmt.Sprintf("subsystem %s, port %d (%d configfs entries)", m.Target.NQN, m.PortID, len(m.Paths))
		if m.Controller != "" || (len(m.Paths) == 0 && m.PortID == 0) {
			what = fmt.Sprintf("controller %s of %s", m.Controller, m.Target.NQN)
			err = s.Disconnect(m)
		} else {
			err = s.Teardown(m)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		done = append(done, what)
	}
	return done, errors.Join(errs...)
}

// safeName keeps the letters, digits and .-_ of an NQN for a file name.
func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '.' || r == '-' || r == '_' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') {
			return r
		}
		return '_'
	}, s)
}
