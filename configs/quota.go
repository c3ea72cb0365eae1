package configs

import "fmt"

// maxQuota is the largest limit Nova stores (its db MAX_INT).
const maxQuota = 0x7FFFFFFF

// quota decodes the api block's quota block: each limit set, checked
// as os-quota-sets checks one (-1 unlimited, up to 2147483647).
func (d *decoder) quota(r *rawQuota) map[string]int64 {
	if r == nil {
		return nil
	}
	out := map[string]int64{}
	for _, q := range []struct {
		name string
		v    *int64
	}{
		{"instances", r.Instances}, {"cores", r.Cores}, {"ram", r.RAM}, {"metadata_items", r.MetadataItems},
		{"injected_files", r.InjectedFiles}, {"injected_file_content_bytes", r.InjectedFileContentBytes},
		{"injected_file_path_bytes", r.InjectedFilePathBytes}, {"key_pairs", r.KeyPairs},
		{"server_groups", r.ServerGroups}, {"server_group_members", r.ServerGroupMembers},
	} {
		if q.v == nil {
			continue
		}
		if *q.v < -1 || *q.v > maxQuota {
			d.bad(r.Body, q.name, "Invalid "+q.name,
				fmt.Sprintf("%s must be -1 (unlimited) or a limit from 0 to %d; got %d.", q.name, maxQuota, *q.v))
			continue
		}
		out[q.name] = *q.v
	}
	return out
}
