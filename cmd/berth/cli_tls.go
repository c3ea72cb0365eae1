package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/berth-project/berth/internal/httpserve"
	"github.com/berth-project/berth/internal/tlsgen"
)

const tlsUsage = `usage:
  berth tls ca   -dir DIR [-name NAME] [-days N]
      make a lab CA in DIR: ca.pem (give it to every machine) and
      ca-key.pem (keep it on the machine that issues certificates)
  berth tls cert -dir DIR -name MACHINE -host NAME_OR_IP[,...] [-days N]
      issue MACHINE.pem and MACHINE-key.pem with the CA in DIR: the
      machine's certificate for every listener and etcd member on it, and
      its client certificate; localhost and 127.0.0.1 are always added
`

// cmdTLS is `berth tls ca|cert`, package tlsgen's lab CA and machine
// certificates.
func cmdTLS(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "ca" && args[0] != "cert") {
		fmt.Fprint(stderr, tlsUsage)
		return 2
	}
	verb := args[0]
	fs := flag.NewFlagSet("berth tls "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "directory of the CA (required)")
	name := fs.String("name", "", "the CA's name (ca; default \"Berth lab CA\") or the machine's (cert; required)")
	hosts := fs.String("host", "", "cert: the machine's DNS names and IP addresses, comma-separated")
	days := fs.Int("days", 0, "validity in days (default: ca 3650, cert 730)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if *dir == "" || fs.NArg() > 0 || (verb == "cert" && *name == "") || *days < 0 {
		fmt.Fprint(stderr, tlsUsage)
		return 2
	}
	validity := time.Duration(*days) * 24 * time.Hour
	fail := func(err error) int {
		fmt.Fprintf(stderr, "berth tls %s: %v\n", verb, err)
		return 1
	}
	if verb == "ca" {
		if *name == "" {
			*name = "Berth lab CA"
		}
		if validity == 0 {
			validity = tlsgen.DefaultCAValidity
		}
		if _, err := tlsgen.WriteCA(*dir, *name, validity); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "%s\n%s\n", filepath.Join(*dir, tlsgen.CACertFile), filepath.Join(*dir, tlsgen.CAKeyFile))
		return 0
	}
	if validity == 0 {
		validity = tlsgen.DefaultCertValidity
	}
	ca, err := tlsgen.LoadCA(*dir)
	if err != nil {
		return fail(err)
	}
	var sans []string
	for _, h := range strings.Split(*hosts, ",") {
		sans = append(sans, strings.TrimSpace(h))
	}
	if err := ca.WriteCert(*dir, *name, sans, validity); err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "%s\n%s\n", tlsgen.CertFile(*dir, *name), tlsgen.KeyFile(*dir, *name))
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
