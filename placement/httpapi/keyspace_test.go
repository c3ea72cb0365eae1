package httpapi

import (
	"net/url"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// TestProviderNamesAnyStringStayInTheSchema: Placement's provider name is
// any string of up to 200 characters ("/" and control characters
// included), and Berth reserves it under Keys.ProviderName. Such a name
// must behave as in Placement (found by ?name=, unique, renamed) while its
// key stays in the schema: escaped, one level, never colliding with
// another name's. Every other id that reaches a Placement key is checked
// by the API's schemas (uuids, CUSTOM_ class and trait names): the test
// lists the whole keyspace after hostile ones too.
func TestProviderNamesAnyStringStayInTheSchema(t *testing.T) {
	s, cli := newStarted(t)
	a := &api{t: t, url: newServer(t, s).URL, s: s}
	names := map[string]string{
		"a/b":                               "7f0a9e4c-1b7d-4a37-9a8e-2e6c1f0d3b01",
		"../../hosts/h1/alive":              "7f0a9e4c-1b7d-4a37-9a8e-2e6c1f0d3b02",
		"tab\tand newline\n":                "7f0a9e4c-1b7d-4a37-9a8e-2e6c1f0d3b03",
		"\x7f%2F":                           "7f0a9e4c-1b7d-4a37-9a8e-2e6c1f0d3b04",
		"%2F":                               "7f0a9e4c-1b7d-4a37-9a8e-2e6c1f0d3b05",
		"7f0a9e4c/members/7f0a9e4c-1b7d-4a": "7f0a9e4c-1b7d-4a37-9a8e-2e6c1f0d3b06",
	}
	for name, u := range names {
		a.must(200, "POST", "/resource_providers", "1.20", map[string]any{"name": name, "uuid": u})
	}
	for name, u := range names {
		r := a.must(200, "GET", "/resource_providers?name="+url.QueryEscape(name), "1.20", nil)
		rps := r.body["resource_providers"].([]any)
		if len(rps) != 1 || rps[0].(map[string]any)["uuid"] != u {
			t.Errorf("?name=%q found %v, want %s alone", name, rps, u)
		}
		// The name is reserved: a second provider cannot take it.
		if r := a.call("POST", "/resource_providers", "1.20", map[string]any{"name": name}); r.status != 409 {
			t.Errorf("second provider named %q: status %d, want 409", name, r.status)
		}
	}
	// A rename frees the old name's key and reserves the new one.
	a.must(200, "PUT", "/resource_providers/"+names["a/b"], "1.20", map[string]any{"name": "a/c"})
	a.must(200, "POST", "/resource_providers", "1.20", map[string]any{"name": "a/b"})

	// Hostile ids that reach keys elsewhere are refused by the schemas.
	a.must(400, "PUT", "/allocations/"+url.PathEscape("x\n"), "1.20", map[string]any{"allocations": map[string]any{}})
	a.must(400, "PUT", "/traits/"+url.PathEscape("CUSTOM_X\n"), "1.20", nil)
	a.must(400, "PUT", "/resource_classes/"+url.PathEscape("CUSTOM_X\t"), "1.7", nil)

	resp, err := cli.Get(testCtx(t), testKeys.All(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	reserved := 0
	for _, kv := range resp.Kvs {
		pk, err := testKeys.ParseKey(string(kv.Key))
		if err != nil {
			t.Errorf("key outside the schema: %v", err)
			continue
		}
		if pk.Kind == etcdschema.KindProviderName {
			reserved++
			continue // a name may be any string: escaped when not clean
		}
		for _, seg := range []string{pk.Host, pk.Cell, pk.UUID, pk.Name, pk.Group, pk.Role, pk.ID} {
			if etcdschema.Escaped(seg) {
				t.Errorf("key %q (%s) holds an escaped segment: an id reached it unchecked", kv.Key, pk.Kind)
			}
		}
	}
	if want := len(names) + 1; reserved != want {
		t.Errorf("%d provider name keys, want %d (one a provider)", reserved, want)
	}
}
