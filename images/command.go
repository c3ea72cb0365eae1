package images

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// CommandProperty is the image property that says what a server of the
// image runs under the process driver: a JSON list of strings, the
// program and its arguments, run without a shell, e.g.
//
//	openstack image create --public --property berth_command='["sleep", "3600"]' sleeper
//
// A list rather than a string to split: an argument with spaces or
// quotes needs no quoting rules, and a shell is there only when asked
// for (["/bin/sh", "-c", "..."]). An image without it is one the fake
// driver boots by name.
const CommandProperty = "berth_command"

// maxCommandBytes bounds the property's text: an argv, not a script.
const maxCommandBytes = 4096

// ErrBadCommand is wrapped by ParseCommand's errors.
var ErrBadCommand = errors.New("invalid " + CommandProperty)

// ParseCommand reads a berth_command value: a JSON list of one or more
// strings, the first (the program) not empty, none holding a NUL byte
// (execve cannot pass one).
func ParseCommand(s string) ([]string, error) {
	bad := func(why string) error {
		return fmt.Errorf("%w: %s; it must be a JSON list of strings, the program and its arguments, e.g. [\"sleep\", \"infinity\"]",
			ErrBadCommand, why)
	}
	if len(s) > maxCommandBytes {
		return nil, bad(fmt.Sprintf("it is %d bytes long, more than %d", len(s), maxCommandBytes))
	}
	dec := json.NewDecoder(strings.NewReader(s))
	var argv []string
	if err := dec.Decode(&argv); err != nil {
		return nil, bad(fmt.Sprintf("%q is not a JSON list of strings", s))
	}
	if dec.More() {
		return nil, bad(fmt.Sprintf("%q has text after the list", s))
	}
	if len(argv) == 0 {
		return nil, bad("the list is empty")
	}
	if argv[0] == "" {
		return nil, bad("the program (the first string) is empty")
	}
	for i, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, bad(fmt.Sprintf("string %d holds a NUL character", i))
		}
	}
	return argv, nil
}

// FormatCommand is the property's value for argv as the API shows it: a
// JSON list, with <, > and & written plainly.
func FormatCommand(argv []string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(argv) // a []string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}
