package main

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/berth-project/berth/identity"
)

// cmdIdentity is `berth identity hash-password`: the password is read
// from stdin (one line; its newline is not part of it), never from an
// argument, which other users could read in the process list and the
// shell keeps in its history.
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
