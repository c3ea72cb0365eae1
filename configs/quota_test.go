package configs

import (
	"reflect"
	"testing"
)

// The api block's quota block: the limits set, and none when absent
// (the API then uses Nova's defaults).
func TestParseQuota(t *testing.T) {
	for _, tc := range []struct {
		desc, src string
		want      map[string]int64
	}{
		{"no quota block", "api {}\n", nil},
		{"some limits", "api {\n  quota {\n    instances = 3\n    cores = -1\n    server_group_members = 0\n  }\n}\n",
			map[string]int64{"instances": 3, "cores": -1, "server_group_members": 0}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.src), "t.hcl")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cfg.API.Quota, tc.want) {
				t.Errorf("quota %v, want %v", cfg.API.Quota, tc.want)
			}
		})
	}
}

func TestParseQuotaRefused(t *testing.T) {
	checkRefused(t, []refused{
		{desc: "below -1", src: "api {\n  quota {\n    cores = -2\n  }\n}\n",
			want: diag{"3:13", "Invalid cores", "cores must be -1 (unlimited) or a limit from 0 to 2147483647; got -2."}},
		{desc: "above Nova's MAX_INT", src: "api {\n  quota {\n    ram = 2147483648\n  }\n}\n",
			want: diag{"3:11", "Invalid ram", "got 2147483648"}},
		{desc: "not a quota", src: "api {\n  quota {\n    floating_ips = 1\n  }\n}\n",
			want: diag{"3:5", "Unsupported argument", `An argument named "floating_ips" is not expected here.`}},
		{desc: "not a number", src: "api {\n  quota {\n    instances = \"ten\"\n  }\n}\n",
			want: diag{"3:17", "Unsuitable value type", "a number is required"}},
	})
}
