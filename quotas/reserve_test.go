package quotas

import (
	"errors"
	"testing"
)

// TestInstancesAllowed is check_num_instances_quota's arithmetic and
// words, cases recorded from the real Nova 26 among them
// (compute/testdata/nova_quotas.json).
func TestInstancesAllowed(t *testing.T) {
	lim := func(instances, cores, ram int64) Limits { return Limits{Instances: instances, Cores: cores, RAM: ram} }
	for _, c := range []struct {
		desc    string
		lim     Limits
		userLim Limits // nil: the user set none
		used    Usage
		req     ServerRequest
		want    int
		msg     string // the refusal's words, "" for none
	}{
		{desc: "fits", lim: lim(10, 20, 51200), req: ServerRequest{Min: 1, Max: 3, VCPUs: 2, RAMMB: 512}, want: 3},
		{desc: "unlimited", lim: lim(-1, -1, -1), used: Usage{Instances: 1e6}, req: ServerRequest{Min: 1, Max: 1, VCPUs: 1}, want: 1},
		{desc: "cores over (recorded)", lim: lim(3, 5, 4096), used: Usage{Instances: 2, Cores: 4, RAM: 1024},
			req: ServerRequest{Min: 1, Max: 1, VCPUs: 2, RAMMB: 512},
			msg: "Quota exceeded for cores: Requested 2, but already used 4 of 5 cores"},
		{desc: "a range, two resources over (recorded)", lim: lim(3, 5, 4096), used: Usage{Instances: 2, Cores: 4, RAM: 1024},
			req: ServerRequest{Min: 2, Max: 3, VCPUs: 2, RAMMB: 512},
			msg: "Quota exceeded for cores, instances: Requested 6, 2-3, but already used 4, 2 of 5, 3 cores, instances"},
		{desc: "cores and ram over (recorded)", lim: lim(3, 5, 1024), used: Usage{Instances: 2, Cores: 4, RAM: 1024},
			req: ServerRequest{Min: 1, Max: 1, VCPUs: 2, RAMMB: 512},
			msg: "Quota exceeded for cores, ram: Requested 2, 512, but already used 4, 1024 of 5, 1024 cores, ram"},
		{desc: "already over after a forced lower limit (recorded)", lim: lim(1, -1, -1), used: Usage{Instances: 2, Cores: 4},
			req: ServerRequest{Min: 1, Max: 1, VCPUs: 2, RAMMB: 512},
			msg: "Quota exceeded for instances: Requested 1, but already used 2 of 1 instances"},
		{desc: "a range cut to the room (recorded)", lim: lim(4, -1, -1), used: Usage{Instances: 2, Cores: 4},
			req: ServerRequest{Min: 1, Max: 5, VCPUs: 2, RAMMB: 512}, want: 2},
		{desc: "a range cut by cores", lim: lim(10, 7, -1), used: Usage{Cores: 2},
			req: ServerRequest{Min: 1, Max: 5, VCPUs: 2}, want: 2},
		{desc: "room below the minimum", lim: lim(4, -1, -1), used: Usage{Instances: 3},
			req: ServerRequest{Min: 2, Max: 2, VCPUs: 1},
			msg: "Quota exceeded for instances: Requested 2, but already used 3 of 4 instances"},
		{desc: "unlimited instances leave no headroom to cut a range to, as in Nova", lim: lim(-1, 3, -1),
			used: Usage{Instances: 5, Cores: 2}, req: ServerRequest{Min: 1, Max: 2, VCPUs: 1},
			msg: "Quota exceeded for cores: Requested 2, but already used 2 of 3 cores"},
		{desc: "the user's own limit", lim: lim(10, 20, -1), userLim: lim(2, 20, -1),
			used: Usage{Instances: 5, Cores: 5, User: &Usage{Instances: 2, Cores: 2}}, req: ServerRequest{Min: 1, Max: 1, VCPUs: 1},
			msg: "Quota exceeded for instances: Requested 1, but already used 2 of 2 instances"},
		{desc: "the project's limit, in the user's usage as Nova words it", lim: lim(5, 20, -1), userLim: lim(4, 20, -1),
			used: Usage{Instances: 5, Cores: 5, User: &Usage{Instances: 1, Cores: 1}}, req: ServerRequest{Min: 1, Max: 1, VCPUs: 1},
			msg: "Quota exceeded for instances: Requested 1, but already used 1 of 5 instances"},
		{desc: "within the user's limit", lim: lim(10, 20, -1), userLim: lim(3, 20, -1),
			used: Usage{Instances: 5, Cores: 5, User: &Usage{Instances: 2, Cores: 2}}, req: ServerRequest{Min: 1, Max: 1, VCPUs: 1}, want: 1},
	} {
		t.Run(c.desc, func(t *testing.T) {
			got, err := instancesAllowed(c.lim, c.userLim, c.used, c.req)
			var over *OverQuotaError
			switch {
			case c.msg != "" && (!errors.As(err, &over) || over.Message != c.msg):
				t.Errorf("got %d, %v\nwant %q", got, err, c.msg)
			case c.msg == "" && (err != nil || got != c.want):
				t.Errorf("got %d, %v; want %d", got, err, c.want)
			}
		})
	}
}
