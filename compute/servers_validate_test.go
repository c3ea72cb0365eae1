package compute

import "testing"

// TestServerValidationMatchesNova checks the servers' create and list
// schemas against the messages Nova 26's own validator gave for the same
// instances, recorded by testdata/nova_servers_validation.py.
func TestServerValidationMatchesNova(t *testing.T) {
	query := func(minor int) schema { s, _ := serversQuery(version{minor}); return s }
	replayValidatorCases(t, "testdata/nova_servers_validation.json", 90, map[string]recordedSchema{
		"create_2.1": {s: serverCreate(version{1})}, "create_2.19": {s: serverCreate(version{19})},
		"create_2.37": {s: serverCreate(version{37})}, "create_2.74": {s: serverCreate(version{74})},
		"create_2.90": {s: serverCreate(version{90})},
		"query_2.1":   {s: query(1), query: true}, "query_2.66": {s: query(66), query: true},
		"query_2.75":         {s: query(75), query: true},
		"actions_query_2.58": {s: instanceActionsQuery(version{58}), query: true},
		"actions_query_2.66": {s: instanceActionsQuery(version{66}), query: true},
	})
}
