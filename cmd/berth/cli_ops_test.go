package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/placement"
)

func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestOpsCLIBadInvocations(t *testing.T) {
	cases := []struct {
		desc string
		args []string
		msg  string
	}{
		{"no verb", []string{"service"}, "usage:"},
		{"unknown verb", []string{"service", "reboot"}, `unknown verb "reboot"`},
		{"disable without host", []string{"service", "disable"}, "usage: berth service disable HOST"},
		{"two hosts", []string{"service", "enable", "a", "b"}, "usage: berth service enable HOST"},
		{"reason without value", []string{"service", "disable", "h1", "--reason"}, "flag needs an argument"},
		{"flag of another verb", []string{"service", "enable", "h1", "--reason", "x"}, "flag provided but not defined: -reason"},
		{"list takes no operand", []string{"host", "list", "x"}, "usage: berth host list"},
		{"cell create without name", []string{"cell", "create"}, "usage: berth cell create NAME"},
		{"selection without instance", []string{"selection", "show"}, "usage: berth selection show INSTANCE"},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			code, _, stderr := runCLI(tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.msg) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, stderr, tc.msg)
			}
		})
	}
}

func TestOpsCLIAgainstAPI(t *testing.T) {
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/t")
	srv := httptest.NewServer(api.New(cli, keys, placement.New(cli, keys, hclog.NewNullLogger()), hclog.NewNullLogger()))
	t.Cleanup(srv.Close)
	ctx := context.Background()
	// A host that registered and then went away: disabling only marks it.
	svc := &etcdschema.Service{Host: "h1", Cell: "cellx", ProviderUUID: "p1", CreatedAt: time.Now()}
	if _, err := cli.Put(ctx, keys.Service("h1"), etcdschema.MustEncode(svc)); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"service", "list"}, 0, "h1    cellx  down   enabled"},
		{[]string{"service", "disable", "h1", "--reason", "bad fan"}, 0, "disabled  false        0              bad fan"},
		{[]string{"service", "disable", "nope"}, 1, "404: Compute host nope could not be found."},
		{[]string{"host", "list"}, 0, "cellx (unmapped)"},
		{[]string{"cell", "create", "cellx"}, 0, "cell cellx created"},
		{[]string{"cell", "create", "cellx"}, 1, "409: Cell cellx already exists."},
		{[]string{"cell", "discover-hosts"}, 0, "mapped h1 to cellx"},
		{[]string{"cell", "list"}, 0, "cellx"},
		{[]string{"service", "enable", "h1"}, 0, "enabled"},
		{[]string{"selection", "show", "no-such"}, 1, "could not be found"},
	}
	for _, st := range steps {
		code, out, stderr := runCLI(append(st.args, "--api", srv.URL)...)
		if code != st.code || !strings.Contains(out+stderr, st.want) {
			t.Fatalf("berth %s: exit %d, output:\n%s%s\nwant exit %d and %q", strings.Join(st.args, " "), code, out, stderr, st.code, st.want)
		}
	}
}
