package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/berth-project/berth/internal/httpserve"
	"github.com/berth-project/berth/internal/tlsgen"
	"github.com/spf13/cobra"
)

// tlsFlags are `berth tls ca|cert`'s flags.
type tlsFlags struct {
	dir, name, hosts string
	days             int
}

// newTLSCmd is `berth tls ca|cert`, package tlsgen's lab CA and machine
// certificates.
func newTLSCmd(s *streams) *cobra.Command {
	tls := groupCmd("tls", "a lab CA and each machine's certificate, for TLS on every listener and etcd")
	ca := &tlsFlags{}
	caCmd := &cobra.Command{
		Use:   "ca --dir DIR [--name NAME] [--days N]",
		Short: "make a lab CA in DIR: ca.pem (give it to every machine) and ca-key.pem (keep it where certificates are issued)",
		Args:  exactArgs(),
		RunE:  func(*cobra.Command, []string) error { return codeErr(cmdTLS("ca", ca, s.out, s.err)) },
	}
	caCmd.Flags().StringVar(&ca.dir, "dir", "", "directory of the CA (required)")
	caCmd.Flags().StringVar(&ca.name, "name", "Berth lab CA", "the CA's name")
	caCmd.Flags().IntVar(&ca.days, "days", 0, "validity in days (default 3650)")
	cert := &tlsFlags{}
	certCmd := &cobra.Command{
		Use: "cert --dir DIR --name MACHINE --host NAME_OR_IP[,...] [--days N]",
		Short: "issue MACHINE.pem and MACHINE-key.pem with the CA in DIR: the machine's certificate for every " +
			"listener and etcd member on it, and its client certificate (localhost and 127.0.0.1 are always added)",
		Args: exactArgs(),
		RunE: func(*cobra.Command, []string) error { return codeErr(cmdTLS("cert", cert, s.out, s.err)) },
	}
	certCmd.Flags().StringVar(&cert.dir, "dir", "", "directory of the CA (required)")
	certCmd.Flags().StringVar(&cert.name, "name", "", "the machine's name (required)")
	certCmd.Flags().StringVar(&cert.hosts, "host", "", "the machine's DNS names and IP addresses, comma-separated")
	certCmd.Flags().IntVar(&cert.days, "days", 0, "validity in days (default 730)")
	tls.AddCommand(caCmd, certCmd)
	return tls
}

// cmdTLS makes the CA (verb ca) or a machine's certificate (cert).
func cmdTLS(verb string, f *tlsFlags, stdout, stderr io.Writer) int {
	switch {
	case f.dir == "":
		fmt.Fprintf(stderr, "berth tls %s: --dir is required\n", verb)
		return 2
	case verb == "cert" && f.name == "":
		fmt.Fprintln(stderr, "berth tls cert: --name is required")
		return 2
	case f.days < 0:
		fmt.Fprintf(stderr, "berth tls %s: --days %d: want a positive number of days\n", verb, f.days)
		return 2
	}
	validity := time.Duration(f.days) * 24 * time.Hour
	fail := func(err error) int {
		fmt.Fprintf(stderr, "berth tls %s: %v\n", verb, err)
		return 1
	}
	if verb == "ca" {
		name := f.name
		if name == "" {
			name = "Berth lab CA"
		}
		if validity == 0 {
			validity = tlsgen.DefaultCAValidity
		}
		if _, err := tlsgen.WriteCA(f.dir, name, validity); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "%s\n%s\n", filepath.Join(f.dir, tlsgen.CACertFile), filepath.Join(f.dir, tlsgen.CAKeyFile))
		return 0
	}
	if validity == 0 {
		validity = tlsgen.DefaultCertValidity
	}
	ca, err := tlsgen.LoadCA(f.dir)
	if err != nil {
		return fail(err)
	}
	var sans []string
	for _, h := range strings.Split(f.hosts, ",") {
		sans = append(sans, strings.TrimSpace(h))
	}
	if err := ca.WriteCert(f.dir, f.name, sans, validity); err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "%s\n%s\n", tlsgen.CertFile(f.dir, f.name), tlsgen.KeyFile(f.dir, f.name))
	return 0
}

// trustOSCACert makes the CLI's and the load tool's HTTP clients (every
// one uses http.DefaultTransport or a clone of it) verify servers with
// the CA file in OS_CACERT, the variable the openstack CLI reads, so one
// setting serves both against a deployment with the lab CA.
func trustOSCACert(stderr io.Writer) {
	file := os.Getenv("OS_CACERT")
	if file == "" {
		return
	}
	tc, err := httpserve.ClientConfig(file, nil)
	if err != nil {
		fmt.Fprintf(stderr, "berth: OS_CACERT: %v\n", err)
		return
	}
	http.DefaultTransport.(*http.Transport).TLSClientConfig = tc
}
