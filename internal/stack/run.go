package stack

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/internal/fdlimit"
)

// StartFunc starts a process's roles on a connected stack: Server,
// Conductor, Agent, EtcdMember, Dev's, or a harness's own.
type StartFunc func(ctx context.Context, s *Stack) error

// Run is one berth process's life: it raises the open-file limit,
// connects (starting embedded etcd when cfg says so), serves the status listener, starts the roles with
// start, prints the banner (each endpoint, one a line) on banner, and
// runs until SIGINT or SIGTERM or a role's failure, then stops in order;
// SIGHUP reloads the TLS certificates.
// name is what the log says is running ("server", "dev"). The error says
// what failed; it is nil after a clean stop on a signal.
func Run(name string, cfg *configs.Config, log hclog.Logger, banner io.Writer, start StartFunc) error {
	if err := cfg.CheckFiles(); err != nil {
		log.Error("bad TLS files", "error", err)
		return err
	}
	sig := signals()
	openFiles := fdlimit.Raise(log)
	s, err := connectUnlessSignalled(cfg, log, sig)
	if err != nil {
		log.Error("cannot reach etcd", "error", err)
		return err
	}
	s.openFiles = openFiles
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go s.reloadOn(hup)
	if err := s.ServeStatus(); err != nil {
		log.Error("start failed", "error", err)
		s.Stop()
		return err
	}
	if err := start(context.Background(), s); err != nil {
		log.Error("start failed", "error", err)
		s.Stop()
		return err
	}
	for _, ep := range s.Endpoints {
		fmt.Fprintf(banner, "%-12s %s\n", ep[0], ep[1])
	}
	log.Info(name + " running")
	return s.wait(sig)
}

func signals() <-chan os.Signal {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	return ch
}

// connectUnlessSignalled is Connect that a signal interrupts: an etcd
// member of a cluster can wait minutes for its peers, and Ctrl-C must not
// wait with it.
func connectUnlessSignalled(cfg *configs.Config, log hclog.Logger, sig <-chan os.Signal) (*Stack, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	interrupted := make(chan os.Signal, 1)
	go func() {
		select {
		case got := <-sig:
			interrupted <- got
			cancel()
		case <-done:
		}
	}()
	s, err := Connect(ctx, cfg, log)
	close(done)
	select {
	case got := <-interrupted:
		if s != nil {
			s.Stop()
		}
		return nil, fmt.Errorf("interrupted by %s while starting", got)
	default:
	}
	return s, err
}
