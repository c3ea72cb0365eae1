package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Until session 11 the process driver kept its records straight in
// StateDir, one directory for every agent configured with it. That broke
// as soon as two of them shared it (berth dev runs every host's agent in
// one process with one config): a move's source and destination wrote,
// and removed, the same <uuid>.json, and a restarted agent adopted the
// other hosts' processes as its own. Records now live in StateDir/<host>.
//
// An agent upgraded in place finds its guests in the old place: it takes
// over the records of the processes that are its own and leaves the
// others' to their agents. A record names no host, but the process does:
// Spawn gave every guest BERTH_HOST in its environment.

// adoptSharedLayout moves into d.dir the records (and output files) of
// the shared layout whose processes this host started, and removes the
// records of processes that are gone.
func (d *ProcessDriver) adoptSharedLayout() error {
	files, err := filepath.Glob(filepath.Join(d.cfg.StateDir, "*.json"))
	if err != nil {
		return fmt.Errorf("process driver: list %s: %w", d.cfg.StateDir, err)
	}
	for _, f := range files {
		st, err := readProcState(f)
		if errors.Is(err, os.ErrNotExist) {
			continue // another host's agent took it meanwhile
		}
		if err != nil {
			return err
		}
		if !sameProcess(st.PID, st.StartTime) {
			_ = os.Remove(f)
			continue
		}
		host := st.Host
		if host == "" {
			host = processHost(st.PID)
		}
		if host != d.host {
			continue // another host's, or unknown: not ours to take
		}
		base := strings.TrimSuffix(filepath.Base(f), ".json")
		// The output first: the record's move is what makes the guest ours.
		_ = os.Rename(filepath.Join(d.cfg.StateDir, base+".log"), filepath.Join(d.dir, base+".log"))
		if err := os.Rename(f, filepath.Join(d.dir, base+".json")); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("process driver: take over %s: %w", f, err)
		}
	}
	return nil
}

// readProcState reads one record; an unreadable one is an error that
// names it (not ours to guess at: an operator moves it away).
func readProcState(f string) (procState, error) {
	var st procState
	b, err := os.ReadFile(f)
	if err != nil {
		return st, fmt.Errorf("process driver: read %s: %w", f, err)
	}
	if err := json.Unmarshal(b, &st); err != nil || st.UUID == "" || st.PID <= 0 {
		return st, fmt.Errorf("process driver: unreadable state record %s (move it away to start): %v", f, err)
	}
	return st, nil
}

// processHost is the BERTH_HOST a guest was started with, read from its
// environment ("" when unreadable).
func processHost(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return ""
	}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("BERTH_HOST=")); ok {
			return string(v)
		}
	}
	return ""
}
