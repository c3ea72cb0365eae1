package stack

import (
	"fmt"
	"net"
	"net/http"
	"os"

	"github.com/berth-project/berth/internal/httpserve"
)

// TLS (the config's tls block): every listener of the process serves the
// same certificate (httpserve.Certificates, loaded on the first listener
// and reloaded on SIGHUP), and the process's Berth clients verify servers
// against its ca_file and present the same certificate when a listener
// asks for one. Without the block everything is plain HTTP (berth dev).

// listen listens on bind, over TLS when the config says so.
func (s *Stack) listen(name, bind string) (net.Listener, error) {
	certs, err := s.tlsCerts()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("%s: listen on %s: %w", name, bind, err)
	}
	if certs != nil {
		ln = httpserve.Listener(ln, certs)
	}
	return ln, nil
}

// tlsCerts loads the tls block's certificates once (nil without a block).
func (s *Stack) tlsCerts() (*httpserve.Certificates, error) {
	t := s.cfg.TLS
	if t == nil || s.certs != nil {
		return s.certs, nil
	}
	certs, err := httpserve.LoadCertificates(t.CertFile, t.KeyFile, t.ClientCAFile)
	if err != nil {
		return nil, err
	}
	s.certs = certs
	return certs, nil
}

// scheme is what the process's listeners speak.
func (s *Stack) scheme() string {
	if s.cfg.TLS != nil {
		return "https"
	}
	return "http"
}

// url is the URL of a listener at addr.
func (s *Stack) url(addr net.Addr) string {
	return s.scheme() + "://" + addr.String()
}

// httpTransport is the transport of the process's Berth HTTP clients:
// verifying servers with the tls block's ca_file, presenting the
// process's certificate; http.DefaultTransport without a block.
func (s *Stack) httpTransport() (http.RoundTripper, error) {
	if s.cfg.TLS == nil {
		return http.DefaultTransport, nil
	}
	certs, err := s.tlsCerts()
	if err != nil {
		return nil, err
	}
	tc, err := httpserve.ClientConfig(s.cfg.TLS.CAFile, certs)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	return tr, nil
}

// ReloadTLS reads the tls block's files again (SIGHUP): new connections
// get the renewed certificate, open ones keep theirs. On error the
// process keeps serving what it had.
func (s *Stack) ReloadTLS() {
	if s.certs == nil {
		s.log.Info("SIGHUP: no tls block, nothing to reload")
		return
	}
	if err := s.certs.Reload(); err != nil {
		s.log.Error("SIGHUP: certificates not reloaded; serving the previous ones", "error", err)
		return
	}
	s.log.Info("SIGHUP: certificates reloaded", "cert_file", s.cfg.TLS.CertFile)
}

// reloadOn reloads the certificates on each signal of hup until the
// stack stops.
func (s *Stack) reloadOn(hup <-chan os.Signal) {
	for {
		select {
		case <-hup:
			s.ReloadTLS()
		case <-s.ctx.Done():
			return
		}
	}
}
