package rolelabel

import (
	"context"
	"testing"

	"github.com/berth-project/berth/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func TestDoLabelsTheContextAndNestedRolesReplaceIt(t *testing.T) {
	tests := []struct {
		desc  string
		outer string
		inner string
		want  string
	}{
		{desc: "one role", outer: "api", want: "api"},
		{desc: "an inner role wins", outer: "api", inner: "etcd server", want: "etcd server"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			var got string
			Do(context.Background(), tc.outer, func(ctx context.Context) {
				got = Of(ctx)
				if tc.inner != "" {
					Do(ctx, tc.inner, func(ctx context.Context) { got = Of(ctx) })
				}
			})
			if got != tc.want {
				t.Fatalf("role = %q, want %q", got, tc.want)
			}
		})
	}
	if got := Of(context.Background()); got != "" {
		t.Fatalf("an unlabelled context has role %q", got)
	}
}

func TestGoRunsLabelled(t *testing.T) {
	got := make(chan string, 1)
	Go(context.Background(), "agent fleet", func(ctx context.Context) { got <- Of(ctx) })
	if r := <-got; r != "agent fleet" {
		t.Fatalf("role = %q, want agent fleet", r)
	}
}
