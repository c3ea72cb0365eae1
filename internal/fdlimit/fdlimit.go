// Package fdlimit raises a process's open-file limit at start. Every
// connection, etcd's files and its snapshots take a descriptor; a process
// that runs out cannot accept, and an embedded etcd member that cannot
// open a file exits. Run calls Raise first, before etcd opens anything.
//
// Since Go 1.19 the runtime itself raises the soft limit, to the hard
// limit less one (so it can tell a later prlimit from its own), and gives
// child processes the original back (software using select(2) breaks past
// 1,024). Raise keeps that: it only calls setrlimit when the soft limit is
// still below that (the runtime's raise failed, or something lowered it),
// since its own call would hand children the raised limit too.
package fdlimit

import "github.com/hashicorp/go-hclog"

// Raise raises the soft open-file limit to the hard limit if the Go
// runtime has not, logs the limit at info, and returns the soft limit
// now in force (0 when it cannot be read). Failing to raise it is a
// warning: the process runs with what it has.
func Raise(log hclog.Logger) uint64 {
	return raise(log, osLimits)
}

// limits reads and sets RLIMIT_NOFILE.
type limits struct {
	get func() (soft, hard uint64, err error)
	set func(soft, hard uint64) error
}

func raise(log hclog.Logger, l limits) uint64 {
	if l.get == nil {
		return 0 // no such limit on this system
	}
	soft, hard, err := l.get()
	if err != nil {
		log.Warn("cannot read the open file limit", "error", err)
		return 0
	}
	if hard == 0 || soft >= hard-1 {
		log.Info("open file limit", "soft", soft, "hard", hard)
		return soft
	}
	if err := l.set(hard, hard); err != nil {
		log.Warn("cannot raise the open file limit to its hard limit", "soft", soft, "hard", hard, "error", err)
		return soft
	}
	log.Info("open file limit raised to its hard limit", "before", soft, "after", hard)
	return hard
}
