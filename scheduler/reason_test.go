package scheduler

import (
	"fmt"
	"testing"

	"github.com/berth-project/berth/placement"
)

func TestFailureReason(t *testing.T) {
	memory := func(host string, free int64) hostVerdict {
		return hostVerdict{Host: host, Kind: verdictMiss,
			Miss: placement.Miss{Kind: placement.MissCapacity, Class: placement.MemoryMB, Amount: 16384, Free: free}}
	}
	maxUnit := func(host string, limit int64) hostVerdict {
		return hostVerdict{Host: host, Kind: verdictMiss,
			Miss: placement.Miss{Kind: placement.MissMaxUnit, Class: placement.VCPU, Amount: 32, Limit: limit}}
	}
	eight := func(v func(i int) hostVerdict) []hostVerdict {
		out := make([]hostVerdict, 8)
		for i := range out {
			out[i] = v(i)
		}
		return out
	}
	host := func(i int) string { return fmt.Sprintf("compute-%d", i+1) }
	cases := []struct {
		desc string
		f    failure
		want string
	}{
		{
			desc: "memory exhausted on every host: the most free",
			f:    failure{Verdicts: eight(func(i int) hostVerdict { return memory(host(i), int64(i%3)*4096) })},
			want: "0 of 8 hosts fit: 8 lacked MEMORY_MB (needs 16384 MB, the most free on a host is 8192 MB).",
		},
		{
			desc: "placed some of a multi-create first",
			f:    failure{Placed: 24, Instances: 60, Verdicts: eight(func(i int) hostVerdict { return memory(host(i), 0) })},
			want: "Placed 24 of 60 instances, then 0 of 8 hosts fit: 8 lacked MEMORY_MB (needs 16384 MB, the most free on a host is 0 MB).",
		},
		{
			desc: "over max_unit on every host",
			f:    failure{Verdicts: eight(func(i int) hostVerdict { return maxUnit(host(i), 16) })},
			want: "0 of 8 hosts fit: VCPU 32 exceeds max_unit 16 on every host.",
		},
		{
			desc: "over max_unit on hosts of different sizes",
			f:    failure{Verdicts: []hostVerdict{maxUnit("a", 16), maxUnit("b", 8)}},
			want: "0 of 2 hosts fit: VCPU 32 exceeds max_unit on every host (the largest is 16).",
		},
		{
			desc: "one host alone is named",
			f:    failure{Verdicts: []hostVerdict{memory("small", 1024)}},
			want: "0 of 1 host fit: small lacked MEMORY_MB (needs 16384 MB, 1024 MB free).",
		},
		{
			desc: "the commonest first, disabled hosts named with their reasons",
			f: failure{Verdicts: []hostVerdict{
				memory("compute-1", 2048), memory("compute-2", 4096),
				{Host: "compute-3", Kind: verdictDisabled, Reason: "maintenance"},
			}},
			want: "0 of 3 hosts fit: 2 lacked MEMORY_MB (needs 16384 MB, the most free on a host is 4096 MB); compute-3 is disabled: maintenance.",
		},
		{
			desc: "many disabled hosts are counted",
			f: failure{Verdicts: eight(func(i int) hostVerdict {
				return hostVerdict{Host: host(i), Kind: verdictDisabled, Reason: map[bool]string{true: "upgrade"}[i == 0]}
			})},
			want: "0 of 8 hosts fit: 8 are disabled (compute-1: upgrade, compute-2, compute-3, ...).",
		},
		{
			desc: "a filter's count keeps Nova-era wording, with a few hosts' reasons",
			f: failure{Verdicts: eight(func(i int) hostVerdict {
				return hostVerdict{Host: host(i), Kind: verdictFilter, By: "ServerGroupAntiAffinityFilter", Reason: "group web has a member here"}
			})},
			want: "0 of 8 hosts fit: ServerGroupAntiAffinityFilter removed 8 (compute-1: group web has a member here; " +
				"compute-2: group web has a member here; compute-3: group web has a member here; ...).",
		},
		{
			desc: "a class nobody has",
			f: failure{Verdicts: []hostVerdict{
				{Host: "a", Kind: verdictMiss, Miss: placement.Miss{Kind: placement.MissNoInventory, Class: "VGPU", Amount: 1}},
				{Host: "b", Kind: verdictMiss, Miss: placement.Miss{Kind: placement.MissNoInventory, Class: "VGPU", Amount: 1}},
			}},
			want: "0 of 2 hosts fit: no host has VGPU.",
		},
		{
			desc: "a host that fits, one that lost a race, one beyond the limit",
			f: failure{Verdicts: []hostVerdict{
				{Host: "a", Kind: verdictFits}, {Host: "b", Kind: verdictClaimLost}, {Host: "c", Kind: verdictUnoffered},
			}},
			want: "1 of 3 hosts fit: b was taken by another request meanwhile; c had room but was not among placement's answers (max_placement_results).",
		},
		{
			desc: "hosts the pick did not weigh (max_hosts_to_weigh)",
			f: failure{Placed: 2, Instances: 3, Verdicts: []hostVerdict{
				memory("a", 0), memory("b", 0), {Host: "c", Kind: verdictUnweighed}, {Host: "d", Kind: verdictUnweighed},
			}},
			want: "Placed 2 of 3 instances, then 0 of 4 hosts fit: 2 lacked MEMORY_MB (needs 16384 MB, the most free on a host is 0 MB); " +
				"2 had room but were not weighed (max_hosts_to_weigh).",
		},
		{
			desc: "disk and min_unit and a trait",
			f: failure{Verdicts: []hostVerdict{
				{Host: "a", Kind: verdictMiss, Miss: placement.Miss{Kind: placement.MissCapacity, Class: placement.DiskGB, Amount: 160, Free: 100}},
				{Host: "b", Kind: verdictMiss, Miss: placement.Miss{Kind: placement.MissMinUnit, Class: placement.MemoryMB, Amount: 256, Limit: 512}},
				{Host: "c", Kind: verdictMiss, Miss: placement.Miss{Kind: placement.MissRequiredTrait, Class: "HW_CPU_X86_AVX2"}},
			}},
			// Equal counts go in the order the conditions are checked.
			want: "0 of 3 hosts fit: c lacks trait HW_CPU_X86_AVX2; MEMORY_MB 256 is under min_unit 512 on b; a lacked DISK_GB (needs 160 GB, 100 GB free).",
		},
		{
			desc: "no host at all",
			f:    failure{},
			want: "No host is known to placement.",
		},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			if got := tc.f.String(); got != tc.want {
				t.Errorf("reason\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}
