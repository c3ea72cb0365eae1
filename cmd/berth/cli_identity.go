package main

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/berth-project/berth/identity"
)

// cmdIdentity is `berth identity hash-password`: the password is read
// from stdin (one line; its newline is not part of it), never from an
// argument, which other users could read in the process list and the
// shell keeps in its history.
func newIdentityCmd(s *streams) *cobra.Command {
	c := groupCmd("identity", "identity helpers: hash a password for an identity block")
	c.AddCommand(&cobra.Command{
		Use:   "hash-password < PASSWORD",
		Short: "read a password on stdin, print its bcrypt hash for identity { user \"NAME\" { password_hash = ... } }",
		Args:  exactArgs(),
		RunE: func(*cobra.Command, []string) error {
			return codeErr(cmdIdentity([]string{"hash-password"}, s.in, s.out, s.err))
		},
	})
	return c
}

func cmdIdentity(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 1 || args[0] != "hash-password" {
		fmt.Fprintln(stderr, "usage: berth identity hash-password < password")
		return 2
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && err != io.EOF {
		fmt.Fprintln(stderr, "berth identity hash-password:", err)
		return 1
	}
	hash, err := identity.HashPassword(strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r"))
	if err != nil {
		fmt.Fprintln(stderr, "berth identity hash-password:", err)
		return 1
	}
	fmt.Fprintln(stdout, hash)
	return 0
}
