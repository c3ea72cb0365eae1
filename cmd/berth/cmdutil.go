package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/berth-project/berth/internal/output"
)

// apiCmd is what every API command shares: the streams and the
// connection flags of its noun.
type apiCmd struct {
	s  *streams
	cf *cloudFlags
}

// noun is an API noun with the connection flags on all its verbs.
func (a *apiCmd) noun(use, short string) *cobra.Command {
	c := groupCmd(use, short)
	addCloudFlags(c, a.cf)
	return c
}

// connect is the command's connection, with a context that ends with
// the process.
func (a *apiCmd) connect(cmd *cobra.Command) (context.Context, *cloud, error) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	c, err := a.cf.connect(ctx)
	return ctx, c, err
}

// printer writes a command's answer as its -o and -c say, with the
// columns the command declared (validated before the command runs, so
// a typo in -c never follows a create).
type printer struct {
	s       *streams
	format  string
	columns []string
	known   []string
}

func addPrinter(c *cobra.Command, s *streams, columns ...string) *printer {
	p := &printer{s: s, known: columns}
	c.Flags().StringVarP(&p.format, "output", "o", "table", "output format: "+strings.Join(output.Formats, ", "))
	c.Flags().StringArrayVarP(&p.columns, "column", "c", nil, "show only this column, repeatable: "+strings.Join(columns, ", "))
	_ = c.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(output.Formats, cobra.ShellCompDirectiveNoFileComp))
	_ = c.RegisterFlagCompletionFunc("column", cobra.FixedCompletions(columns, cobra.ShellCompDirectiveNoFileComp))
	prev := c.PreRunE
	c.PreRunE = func(cmd *cobra.Command, args []string) error {
		if _, err := p.options(); err != nil {
			return err
		}
		if prev != nil {
			return prev(cmd, args)
		}
		return nil
	}
	return p
}

func (p *printer) options() (output.Options, error) {
	f, err := output.ParseFormat(p.format)
	if err != nil {
		return output.Options{}, &usageError{msg: err.Error()}
	}
	o := output.Options{Format: f, Columns: p.columns}
	// An empty answer checks -c against the declared columns.
	if err := o.WriteList(discard{}, output.List{Columns: p.known}); err != nil {
		var uc *output.UnknownColumnError
		if errors.As(err, &uc) {
			return o, &usageError{msg: err.Error()}
		}
		return o, err
	}
	return o, nil
}

// list writes rows of the declared columns.
func (p *printer) list(rows [][]any) error {
	o, err := p.options()
	if err != nil {
		return err
	}
	return o.WriteList(p.s.out, output.List{Columns: p.known, Rows: rows})
}

// record writes one resource's values of the declared columns.
func (p *printer) record(values ...any) error {
	o, err := p.options()
	if err != nil {
		return err
	}
	return o.WriteRecord(p.s.out, output.Record{Fields: p.known, Values: values})
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

// each runs fn on every operand of a bulk verb (`server delete A nope
// B`), never stopping at a failure: each failure is said on stderr as it
// happens, and the error sums them up. Its exit status is 3 when every
// failure was a resource not found, else the first other failure's.
func each(s *streams, what string, names []string, fn func(name string) error) error {
	var failed []string
	code := 0
	for _, n := range names {
		err := fn(n)
		if err == nil {
			continue
		}
		fmt.Fprintf(s.err, "%s %s: %v\n", what, n, err)
		failed = append(failed, n)
		if c := exitCodeOf(err); code == 0 || code == exitNotFound {
			code = c
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return &exitError{code: code, err: fmt.Errorf("%d of %d failed: %s", len(failed), len(names), strings.Join(failed, " "))}
}

// named is a resource's id and name, for finding one by either.
type named struct{ id, name string }

// pick finds the resource arg names, by id first, else by name; a name
// several resources have is an error listing their ids.
func pick(what, arg string, all []named) (string, error) {
	var byName []string
	for _, r := range all {
		if r.id == arg {
			return r.id, nil
		}
		if r.name == arg {
			byName = append(byName, r.id)
		}
	}
	switch len(byName) {
	case 0:
		return "", &notFoundError{what: what, name: arg}
	case 1:
		return byName[0], nil
	}
	return "", fmt.Errorf("%d %ss are named %q, give an id: %s", len(byName), what, arg, strings.Join(byName, " "))
}

// orDash is "" for nil pointers and empty values.
func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// completeNames completes a command's resource operands with the names
// list returns from the API (shell completion of `server show <TAB>`);
// nothing when the API cannot be reached.
func (a *apiCmd) completeNames(list func(ctx context.Context, cl *cloud) ([]string, error)) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		ctx, cl, err := a.connect(cmd)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		names, err := list(ctx, cl)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}
